// The GEMM/GEMV generator for the zmm (AVX512-VNNI, EVEX), ymm (AVX-VNNI, VEX) and ymm
// AVX2 paths. One loop structure, three dot-product flavours:
//
//   for unit block (NR units of 16 columns)            <- thread slice [unit_begin, unit_end)
//     for row block (MR rows; tails 1..MR-1)
//       register tile: acc[r][t] (int32), fsum[r][t] (float), t = panel x vector
//       for group j:                                   (Kp / g groups, g / 4 rows each)
//         acc = 0
//         for packed row (64 bytes / panel): prefetch, load weights, broadcast x quads, dot
//         correct: C = acc - bias * xsum_j ;  fsum = fma(float(C), f16 scale_j, fsum)
//                  asymmetric: fsum = fma(float(xsum_j), f16 offset_j, fsum)
//       y = fsum * a[row]; epilogue (bias, SwiGLU, residual); store (masked N tail)
//
// With v = operand - bias (ops/quant/packed_layout.h) and C = sum xq * v:
// dot(acc, x, w):  VNNI      acc += vpdpbusd(w_u8, xq)       C = acc - bias * xsum (128 or 8)
//                  AVX2 int8 w = w_u8 ^ 0x80 = v;  acc += maddwd(maddubs(|v|, sign(xq, v)), 1)
//                                                  C = acc
//                  AVX2 int4 acc += maddwd(maddubs(nibble, xq), 1)   C = acc - bias * xsum
//                  (int5: the nibble plus 16 where the bit plane has the fifth bit)
// The AVX2 forms are exact: |v| <= 128 and |sign(xq, v)| <= 127 (int8), nibble <= 15
// (int4), so each vpmaddubsw pair is at most 2 * 128 * 127 < 2^15.
//
// The prefetch runs `prefetch_distance` bytes ahead in each panel's stream. Near a panel's
// end it would run on into panel p + 1, which the tile reads beside p and has read already;
// in the last row block of a tile with another unit block after it, it runs on into panel
// p + P instead (P the tile's panels), so the next unit block's streams start warm:
//
//   tile u:    panel 0 .......[zone] panel 1 .......[zone] ... panel P-1 .......[zone]
//                                |                                              |
//   tile u+1:  panel P <---------+ (its first distance bytes)     panel 2P-1 <--+
//
// (emit_group_k, emit_stream_handoff: handoff_ = (P - 1) x panel bytes in the zone, else 0.)
//
// A one-unit SwiGLU tile of a decode key reads its two panels in two passes instead
// (panel_sequential_ below): one stream through a thread's chunk.
//
// Weight-only keys (activation f32, gemm_woq_emit.cpp) keep the loops and the epilogue
// and change the operand: per packed row and k, each column's operand field is masked in
// place in its dword (operand * 2^p), converted and multiplied by the broadcast x[k] * 2^-p
// (woq_fields.h):  acc += float(operand) * x           C = acc - bias * xsum (float)
//
// Split keys (activation s8x2 / s8x3, gemm_key.h) are integer kernels whose tile is the D
// digit rows of one activation row: each digit row is scaled by its a like any s8 row,
// then the epilogue sums them, the last (smallest) first, into the tile's one output row
// (row r / D of C). M is a multiple of D; there are no row tails.
// and the epilogue has no row scale to apply. bf16 keys (int4, zmm) look each pair of
// nibbles up as bf16 operand - bias (vpermw) and multiply it by a bf16 pair of x
// (vdpbf16ps): acc += v[k] x[k] + v[k'] x[k'], C = acc.
//
// AmxGenerator (amx_generator.h) derives from this class: its tiles replace the loops and
// the dot products, and it calls the group correction and epilogue below unchanged.
#pragma once

#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>

#include "jit/core/jit_generator.h"
#include "jit/gemm/gemm_args.h"
#include "jit/gemm/gemm_key.h"
#include "jit/gemm/register_budget.h"

namespace qforge {

class GemmGenerator : public JitGenerator {
 public:
  // Generates the kernel for `key` (throws qforge::Error if the key cannot be served).
  explicit GemmGenerator(const GemmKey& key);
  GemmKernelFn kernel() const { return kernel_; }
  const GemmKey& key() const { return key_; }
  // Whether the kernel reads a SwiGLU tile's gate and up panels in turn (panel_sequential_).
  bool panel_sequential() const { return panel_sequential_; }

 protected:
  using Xmm = Xbyak::Xmm;
  using Reg64 = Xbyak::Reg64;

  // For a generator that emits its own loops and dot products around this one's group
  // correction, epilogue and constants (AmxGenerator): derives the key's geometry and
  // emits nothing.
  struct GeometryOnly {};
  GemmGenerator(const GemmKey& key, std::size_t max_code_bytes, GeometryOnly);

  // Loops.
  void emit_unit_loop();
  void emit_row_loop(int units);
  void emit_tile(int rows, int units);
  void emit_tile_pass(int rows, int units);
  void emit_stream_pointers();
  void emit_k_loop(int rows, int units, const std::string& tile);
  void emit_group_k(int rows, int units);
  void emit_k_rows(int rows, int units, int count);
  void emit_stream_handoff(int rows, int units, std::int64_t last_groups);
  void emit_panel_prefetch(std::int64_t at);
  void emit_packed_row(int rows, int units, int row_disp_a, int row_disp_b, int disp_bits = -1);
  void emit_fifth_bits(const Xmm& operand, std::int64_t at);
  void emit_dot(const Xmm& acc, const Xmm& x, int weight_index, bool high);
  // Weight-only (gemm_woq_emit.cpp).
  void emit_woq_row_loads(int units, int disp_b);
  void emit_woq_packed_row(int rows, int units, int disp_k, int disp_b);
  void emit_woq_bf16_packed_row(int rows, int units, int disp_k, int disp_b);
  void emit_woq_field(const Xmm& out, const Xmm& raw, int field);
  void emit_woq_group_correction(int rows, int units);
  // The operand bias of the packed layout (ops/quant/packed_layout.h) the float group
  // correction removes: 128 for int8, 8 for symmetric int4, 0 for asymmetric int4 and for
  // the bf16 kernels (their table holds operand - bias).
  int woq_operand_bias() const { return bf16_ ? 0 : layout_bias(); }
  // v = operand - bias: 128 (int8), 16 (int5) or 8 (int4) symmetric, 0 asymmetric int4/5.
  int layout_bias() const {
    return key_.bits == 8 ? 128 : (key_.asymmetric ? 0 : 1 << (key_.bits - 1));
  }
  // Group end and epilogue (gemm_epilogue_emit.cpp).
  void emit_group_correction(int rows, int units);       // then steps to the next group
  void emit_group_correction_rows(int rows, int units);  // acc -> float sums (or group sums)
  int correction_shift() const;
  // Float sums += C * scale (+ xsum * offset) for vector t of row `row`, with the scales
  // emit_group_scales left (ops/quant/packed_layout.h; two-level scales from super_ too).
  void emit_scaled_group_sum(int row, int t, const Xmm& xsum, int scale_temp = 3);
  void emit_group_scales(int pp, int v);
  void emit_group_scale(const Xmm& out, int pp, int v, bool offset);
  // Two-level scales: super_ at the first super-block's header and bk_ past it; after a
  // group, at a super-block boundary, both on to the next one. `record` false: bk_ only
  // (a loop that reads the rows but not the scales).
  void emit_first_super_header(bool record = true);
  void emit_next_super_header(const Xbyak::Label& group_loop, bool record = true);
  void emit_epilogue(int rows, int units);
  void emit_epilogue_from_registers(int rows, int units);  // y already in acc / fsum
  void emit_unit_epilogue(int rows, int unit, int tail_columns);
  void emit_store(const Xmm& y, const Xbyak::Address& at_f32, int lanes);
  void emit_store_u8(const Xmm& y, const Reg64& base, int byte_offset, int lanes);
  void emit_masked_load_add(const Xmm& y, const Reg64& base, int byte_offset, int lanes);
  // Vector math (vector_math_emit.cpp).
  void emit_silu(const Xmm& y, int first_temp);
  void emit_round_half_away(const Xmm& y, const Xmm& temp);
  void emit_constants();

  // Register roles (see register_budget.h). t = packed panel * V + vector.
  Xmm vec(int index) const;
  Xmm acc(int row, int t) const;
  // The high-nibble dot products of a one-chain tile (split_chain_), added into acc(0, 0)
  // before each group correction: a register far above the tile's few roles.
  Xmm acc_high() const { return vec(isa_.registers / 2); }
  Xmm fsum(int row, int t) const;  // float sums in registers
  Xbyak::Address fsum_spill(int row, int t) const;
  Xmm weight(int t, bool high) const;
  Xmm abs_weight(int t) const;  // AVX2 int8: |w|
  Xmm broadcast() const;
  Xmm nibble_mask() const;
  Xmm dot_temp() const;
  Xmm woq_field() const { return vec(0); }  // weight-only roles (register_budget.h)
  Xmm woq_broadcast(int row) const { return vec(1 + row); }
  Xmm woq_raw(int t) const { return vec(1 + key_.blocking.mr + t); }
  Xmm woq_table() const { return vec(1 + key_.blocking.mr + max_per_row_); }  // bf16
  Xmm epilogue_temp(int i) const;  // free after the K loop
  Xbyak::Address constant(int offset) const;
  Xbyak::Address vector_at(const Reg64& base, std::int64_t offset) const;
  Xbyak::Address bcast_at(const Reg64& base, std::int64_t offset) const;
  void zero(const Xmm& x);
  int per_row(int units) const { return units * panels_per_unit_ * slice_vectors_; }
  // Vector t of a tile row: panel t / V, vector slice_first_ + t % V of that panel.
  int panel_of(int t) const { return t / slice_vectors_; }
  int vector_of(int t) const { return slice_first_ + t % slice_vectors_; }
  // Whether the K loop being emitted reads panel pp / vector t (all, or pass_panel_'s).
  bool panel_active(int pp) const { return pass_panel_ < 0 || pp == pass_panel_; }
  bool active(int t) const { return panel_active(panel_of(t)); }

  GemmKey key_;
  VectorIsa isa_;
  RegisterPlan plan_;
  bool zmm_;
  bool woq_;             // f32 or bf16 activations
  bool bf16_;            // bf16 pairs (woq_fields.h), vdpbf16ps
  int split_ = 0;        // D of split activations: a tile is one row's D digit rows
  int a_element_bytes_;  // of the activation rows: 1 (s8), 4 (f32), 2 (bf16)
  int panels_per_unit_, vectors_per_panel_, vector_bytes_;
  int slice_vectors_;    // vectors of each panel per pass (register_budget.h)
  int slice_first_ = 0;  // first vector of the pass being emitted
  std::int64_t groups_, panel_bytes_, group_data_bytes_, trailer_bytes_;
  // The K loop's step (packed_layout.h): a 64-byte row of k_per_row_ k, or an int5 chunk.
  std::int64_t k_per_step_, step_bytes_, steps_per_group_;
  std::int64_t superblock_groups_ = 0, super_header_bytes_ = 0;  // two-level scales
  std::int64_t a_stride_, k_per_row_, n_padded_;
  int max_per_row_;
  // A zmm VNNI tile of one accumulator (M = 1, one 16-column panel: Zen 4's GEMV tile) with
  // sub-byte weights: its two dot products per packed row would be one dependency chain,
  // 2 x the vpdpbusd latency per 64 bytes (8 cycles, 29 GB/s a core on Zen 4); the high
  // nibbles' dot products go to acc_high() instead, two chains:
  //
  //   row j:  acc      += lo(w_j) . x[8j .. 8j+3]      (low nibbles, first quad)
  //           acc_high += hi(w_j) . x[8j+4 .. 8j+7]    (high nibbles, second quad)
  //   group end:  acc += acc_high   (exact: int32), then the group correction as before
  bool split_chain_ = false;
  // A weight-only GEMV key with four chains (GemmKey::woq_chains; M = 1, zmm): field (or
  // bf16 pair) i of each packed row multiplies into chain i % 4 of its vector, and before
  // each group correction the chains are summed in order, ((acc + c1) + c2) + c3, for every
  // blocking of the key alike. Without them a one-unit tile's FMAs (vdpbf16ps) are one chain
  // of 4-6 cycle latencies per 64 bytes.
  int woq_chains_ = 1;
  Xmm woq_chain(int t, int c) const;  // chain 0: acc(0, t); 1..3 below the float sums
  // A one-unit SwiGLU tile of a decode key (a gate panel and its up panel, adjacent in
  // memory) reads its panels one after the other, each with its whole K loop, instead of
  // side by side: a thread's chunk of adjacent pairs is then one stream read front to back,
  // where side by side the up panel's stream started cold at every tile (0.81-0.83 of the
  // paired read against the plain GEMV's 0.93-0.95 on a Zen 4 guest). Every accumulator and
  // float sum stays live through the passes; the epilogue runs once after the last.
  //
  //   pass 0: gate panel 2u     groups 0 .. G-1     acc/fsum of the gate vectors
  //   pass 1: up panel 2u + 1   groups 0 .. G-1     acc/fsum of the up vectors
  //   epilogue: silu(gate) * up
  bool panel_sequential_ = false;
  int pass_panel_ = -1;   // the panel of the pass being emitted (-1: all, side by side)
  int tile_rows_ = 1;     // rows of the tile being emitted
  int tile_per_row_ = 1;  // vectors per row of the tile being emitted
  // Spilled float sums: row r, vector t at [spill_base_ + spill_displacement_ +
  // (r * max_per_row_ + t) * vector_bytes_].
  Reg64 spill_base_ = Xbyak::util::rsp;
  int spill_displacement_ = 0;

  Reg64 args_, unit_, row_, bk_, ak_, kloop_, gloop_, sums_, tmp_, tmp2_, out_;
  // The prefetch stream handoff (the diagram above): added to every panel prefetch's
  // address; 0, or (P - 1) x panel bytes in the handoff zone of the tile's last row block.
  Reg64 handoff_;
  bool handoff_on_ = false;
  Reg64 super_;          // two-level scales: the current super-block's header (in panel 0)
  int super_slot_ = -1;  // >= 0: the header pointer lives at [rsp + super_slot_] (AMX)
  // Names the frame's argument and first 10 temporaries as the registers above (the
  // constructors name the 11th super_ and, in this class's frame, the 12th handoff_).
  void bind_frame_registers(const Xbyak::util::StackFrame& frame);
  // A group trailer's offsets follow its 16 f16 scales (ops/quant/packed_layout.h).
  static constexpr int kTrailerOffsetBytes = 32;
  // int5: k per chunk of 4 nibble rows and their fifth-bit row.
  static constexpr int kFifthBitK = 32;
  // Two-level: the trailer's s8 sub-offsets follow its 16 s8 sub-scales; the super-block
  // header's f16 offsets follow its 16 f16 scales.
  static constexpr int kTrailerSubOffsetBytes = 16;
  static constexpr int kSuperOffsetBytes = 32;
  Xbyak::Label constants_;
  GemmKernelFn kernel_ = nullptr;
};

// Constant table offsets (one vector each, vector_bytes apart, in emit_constants order).
inline constexpr int kWoqFieldMasks = 7;  // the int4 fields below the top one
enum GemmConstant : int {
  kConstOnes16 = 0,
  kConstNibbleMask,
  kConstHalf,
  kConstExpLo,
  kConstExpHi,
  kConstLog2e,
  kConstLn2Hi,
  kConstLn2Lo,
  kConstExpP0,
  kConstExpP1,
  kConstExpP2,
  kConstExpP3,
  kConstExpP4,
  kConstExpP5,
  kConstOne,
  kConstExponentBias,
  kConstZero,
  kConst255,
  kConstByteSign,    // 0x80 in every byte: u8 operand -> the signed value v (AVX2 int8)
  kConstFieldMasks,  // weight-only: mask << p for the fields below the top one
                     // (woq_fields.h): 0xff << 8j (int8, j < 3), 0xf << 4j (int4, j < 7)
  kConstOperandBias = kConstFieldMasks + kWoqFieldMasks,  // weight-only: the operand
                                                          // bias as a float (128, 8 or 0)
  kConstLaneMasks,                          // ymm only: 8 x -1 then 8 x 0 (two vectors)
  kConstBf16Nibbles = kConstLaneMasks + 2,  // bf16 kernels: 32 words, bf16(operand - bias)
                                            // of the index's low 4 bits (zmm only)
  kConstFifthBit = kConstBf16Nibbles,       // int5 kernels (never bf16): 0x10 bytes, then
                                            // (ymm) the bit spread: byte j = j / 8, then
                                            // byte j = 1 << j % 8
};

}  // namespace qforge
