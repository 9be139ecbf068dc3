// The AMX-INT8 prefill GEMM generator: tiles (amx_tile_plan.h) for the dot products, and
// GemmGenerator's zmm group correction, epilogue and constants for everything after them,
// so the two kernels dequantize and store identically.
//
//   sttilecfg live; if live != config[R]: ldtilecfg config[R]     (R = rows per block)
//   for unit block (2 panels)                        <- thread slice [unit_begin, unit_end)
//     for row block (R rows; the last one starts at M - R)
//       float sums = 0                               [rsp: 32 rows x 2 panels x 16 f32]
//       for group j:                                 (Kp / g groups, g / 64 steps each)
//         C tiles = 0
//         for k step: B tiles <- packed rows (int4: nibbles unpacked to s8 on the stack)
//                     A tiles <- xu rows;  C += A x B (tdpbusd)
//         C tiles -> stack; per row (zmm): C = acc - comp + zc * xsum;
//                     sums += float(C) * s (+ float(xsum) * offset, asymmetric)
//       per row not stored yet: y = sums * a[row]; epilogue; store (masked N tail)
//
// The configuration check runs in the kernel on the calling thread's own tile state, so
// it holds whichever kernel (or library) loaded a configuration before. Groups must be a
// multiple of 64 (one tile step); other keys throw qforge::Error and the caller keeps the
// zmm kernel.
#pragma once

#include "jit/gemm/amx_tile_plan.h"
#include "jit/gemm/gemm_generator.h"

namespace qforge {

class AmxGenerator : public GemmGenerator {
 public:
  // Generates the kernel for `key` (key.isa == amx; throws qforge::Error if unsupported).
  explicit AmxGenerator(const GemmKey& key);

 private:
  void emit_prologue(const Xbyak::Label& done);
  void emit_unit_blocks();
  void emit_row_blocks(int units);
  void emit_block(int row_tiles, int units);
  void emit_k_step(int row_tiles, int panels);
  void emit_unpack_panels(int units);
  void emit_stack_probe(int frame_bytes);
  void emit_group_dequant(int row_tiles, int units);
  void emit_block_epilogue(int units);
  void emit_tile_configs();

  int step_k_;       // k per tile step: amx_step_k(g)
  Reg64 rows_;       // R: rows per block
  Reg64 rowp_;       // row r of the stage / float sums (rsp + r * 128)
  Reg64 rows_left_;  // row loop counter
  Xbyak::Label configs_;
};

}  // namespace qforge
