// The weight-only dot product of the GEMM generator: f32 activations against the packed
// u8 operands, dequantized in registers.
//
//   one 64-byte packed row of a panel = 16 columns x 4 k (int8) or 8 k (int4); a vector
//   holds 8 (ymm) or 16 (zmm) columns' dwords:
//
//     dword of column c   int8: [ k0 | k1 | k2 | k3 ]            bytes, low first
//                         int4: [ k0 k4 | k1 k5 | k2 k6 | k3 k7 ]  nibbles, low first
//
//   for each k of the row: field = dword & (mask << p)  (operand * 2^p; top field: >> p)
//                          acc[r] = fma(float(field), x[r][k] 2^-p broadcast, acc[r])
//   (woq_fields.h: the activations are stored pre-scaled, so the product is exact)
//
// The conversion of a field is shared by the tile's rows, so prefill tiles (MR rows)
// spend MR FMAs per conversion and decode one. The group correction then removes the
// operand bias with the group's sum of x (float_activations.h) and scales:
//
//   C    = acc - bias * xsum                  (bias 128 int8, 8 int4, 0 int4 asymmetric)
//   fsum = fma(C, scale, fsum)   (asymmetric: fsum = fma(xsum, offset, fsum))
//
// bf16 activations (int4, zmm): per pair j of the row (woq_fields.h) the dword's halves
// are shifted by 4j words-wise and looked up in a table of bf16(operand - bias)
// (vpermw reads the low 5 bits of each word; the table repeats every 16 and is held in a
// register, loaded at each group), then
//   acc[r] = vdpbf16ps(acc[r], pair, x[r] pair j broadcast)
// so the correction has no bias to remove (C = acc).
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/woq_fields.h"

namespace qforge {

using namespace Xbyak;
using namespace Xbyak::util;

// out = float(field i of every dword of `raw`) * 2^p: masked in place, or the top field
// shifted down (woq_fields.h; the activations carry the 2^-p).
void GemmGenerator::emit_woq_field(const Xmm& out, const Xmm& raw, int i) {
  const int shift = woq_field_shift(key_.bits, i);
  if (woq_top_field(key_.bits, i)) {
    vpsrld(out, raw, shift);
  } else {
    const Address mask = constant(kConstFieldMasks + shift / key_.bits);
    if (zmm_)
      vpandd(out, raw, mask);
    else
      vpand(out, raw, mask);
  }
  vcvtdq2ps(out, out);
}

// The tile's operand vectors of one 64-byte packed row (each loaded once), after the
// prefetch of every panel's stream.
void GemmGenerator::emit_woq_row_loads(int units, int disp_b) {
  const int panels = units * panels_per_unit_;
  for (int pp = 0; pp < panels; ++pp)
    if (panel_active(pp)) emit_panel_prefetch(pp * panel_bytes_ + disp_b);
  for (int t = 0; t < per_row(units); ++t)
    if (active(t))
      vmovups(woq_raw(t),
              vector_at(bk_, panel_of(t) * panel_bytes_ + disp_b + vector_of(t) * vector_bytes_));
}

// One 64-byte row of every panel in the tile; disp_k is the row's first k in the group.
// Each vector of operands is loaded once; per k the rows' x are broadcast and every
// vector's field is converted once and multiplied into all rows.
void GemmGenerator::emit_woq_packed_row(int rows, int units, int disp_k, int disp_b) {
  const int t_count = per_row(units);
  emit_woq_row_loads(units, disp_b);
  for (int i = 0; i < k_per_row_; ++i) {
    for (int r = 0; r < rows; ++r)
      vbroadcastss(woq_broadcast(r), dword[ak_ + r * a_stride_ + (disp_k + i) * 4]);
    for (int t = 0; t < t_count; ++t) {
      if (!active(t)) continue;
      emit_woq_field(woq_field(), woq_raw(t), i);
      for (int r = 0; r < rows; ++r)  // with chains rows == 1
        vfmadd231ps(woq_chains_ > 1 ? woq_chain(t, i % woq_chains_) : acc(r, t), woq_field(),
                    woq_broadcast(r));
    }
  }
}

// The same row with bf16 activations: 4 pairs of fields, one table lookup (and a word
// shift for pairs 1..3) per vector and pair, shared by the tile's rows.
void GemmGenerator::emit_woq_bf16_packed_row(int rows, int units, int disp_k, int disp_b) {
  const int t_count = per_row(units);
  emit_woq_row_loads(units, disp_b);
  const Xmm table = woq_table();
  for (int j = 0; j < kWoqBf16Pairs; ++j) {
    // x pair j of this row: dword j of the row's 16 bytes (disp_k bf16 values in).
    for (int r = 0; r < rows; ++r)
      vpbroadcastd(woq_broadcast(r), dword[ak_ + r * a_stride_ + disp_k * 2 + j * 4]);
    for (int t = 0; t < t_count; ++t) {
      if (!active(t)) continue;
      if (j == 0) {
        vpermw(woq_field(), woq_raw(t), table);
      } else {
        vpsrlw(woq_field(), woq_raw(t), 4 * j);
        vpermw(woq_field(), woq_field(), table);
      }
      for (int r = 0; r < rows; ++r)  // with chains rows == 1
        vdpbf16ps(woq_chains_ > 1 ? woq_chain(t, j % woq_chains_) : acc(r, t), woq_field(),
                  woq_broadcast(r));
    }
  }
}

// After a group's K rows, bk_ points at panel 0's trailer of that group (as for the
// integer kernels: gemm_epilogue_emit.cpp); row r's float xsum is [sums_ + r * groups * 4].
void GemmGenerator::emit_woq_group_correction(int rows, int units) {
  const int t_count = per_row(units);
  const bool biased = woq_operand_bias() != 0;
  const Xmm xsum = epilogue_temp(1);
  for (int r = 0; r < rows; ++r) {
    vbroadcastss(xsum, dword[sums_ + r * groups_ * 4]);
    for (int t = 0; t < t_count; ++t) {
      if (!active(t)) continue;
      const int pp = panel_of(t), v = vector_of(t);
      const Xmm sum = acc(r, t);
      if (biased) vfnmadd231ps(sum, xsum, constant(kConstOperandBias));  // C = acc - bias * xsum
      emit_group_scales(pp, v);
      emit_scaled_group_sum(r, t, xsum);
    }
  }
}

}  // namespace qforge
