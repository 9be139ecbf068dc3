// The AMX prefill GEMM generator: tiles (amx_tile_plan.h) for the dot products, and
// GemmGenerator's zmm group correction, epilogue and constants for everything after them,
// so the two kernels dequantize and store identically.
//
//   sttilecfg live; if live != config[R]: ldtilecfg config[R]     (R = rows per block)
//   for unit block (2 panels)                        <- thread slice [unit_begin, unit_end)
//     int4: every group's B tiles unpacked once onto the stack
//     for row block (R rows; the last one starts at M - R)
//       float sums = 0                               [rsp: 32 rows x 2 panels x 16 f32]
//       for group j:                                 (Kp / g groups, g / step k steps each)
//         C tiles = 0
//         for k step: B tiles <- packed rows (int4: the unpacked ones)
//                     A tiles <- xq rows;  C += A x B (tdpbsud)
//         C tiles -> stack; per row (zmm): C = acc - comp + zc * xsum;
//                     sums += float(C) * s (+ float(xsum) * offset, asymmetric)
//       per row not stored yet: y = sums * a[row]; epilogue; store (masked N tail)
//
// Weight-only int4 with bf16 activations (AMX-BF16) keeps the loops and changes the
// operands: B tiles of bf16(operand - bias) pairs looked up from the nibbles (vpermw, as
// the zmm bf16 kernel does), A tiles of the bf16 rows of x, steps of 32 k,
//   C += A x B (tdpbf16ps, f32);  per row: sums += C * s (+ xsum * offset);  y = sums.
//
// The configuration check runs in the kernel on the calling thread's own tile state, so
// it holds whichever kernel (or library) loaded a configuration before. Groups must be a
// multiple of 32 (one tile step of 32 or 64 k); other keys throw qforge::Error and the
// caller keeps the zmm kernel.
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
  void emit_unpack_quads(int panel, int row);       // u8 B rows of int4 / int5
  void emit_unpack_bf16_pairs(int panel, int row);  // bf16 B rows of int4
  void emit_stack_probe(int frame_bytes);
  void emit_group_dequant(int row_tiles, int units);
  void emit_block_epilogue(int units);
  void emit_tile_configs();

  int step_k_;        // k per tile step: amx_step_k(key)
  int step_a_bytes_;  // bytes of an A row per step: step_k (s8) or 2 step_k (bf16)
  Reg64 rows_;        // R: rows per block
  Reg64 rowp_;        // row r of the stage / float sums (rsp + r * 128)
  Reg64 rows_left_;   // row loop counter
  Xbyak::Label configs_;
};

}  // namespace qforge
