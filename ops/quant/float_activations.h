// The weight-only kernels' A operand: the f32 activation rows themselves, laid out the
// way the kernels stream them, and the per-group sums the operand-bias correction needs.
//
//   row r: Kp floats at x + r * row_stride bytes (row_stride a multiple of 64 >= 4 Kp);
//          k in [K, Kp) holds 0, so padded weights contribute nothing; x[k] is stored
//          times 2^-e(k), e the bit position at which the kernel finds k's operand
//          (jit/gemm/woq_fields.h: the kernel masks the operand in place, so the product
//          comes out exact)
//   sums[r][j] = sum of x[r][k] over group j (unscaled), in float, k in order
//
// With v = operand - bias (ops/quant/packed_layout.h) a weight-only kernel forms per
// group j and column n
//     acc = sum_k x[k] * operand[k]           (float FMA)
//     y  += (acc - bias * sums[j]) * scale[n][j]  (+ sums[j] * offset[n][j])
// and no row scale: the activations are not quantized.
//
// bf16 (int4 weights, the vdpbf16ps kernels): row r is Kp bf16 values at pairs + r *
// row_stride bytes (row_stride a multiple of 64 >= 2 Kp), each packed row's 8 k as the 4
// dword pairs the kernel multiplies (woq_fields.h: (k0, k2), (k4, k6), (k1, k3), (k5, k7)),
// x rounded to nearest even, unscaled; sums[r][j] sums the rounded values, in float.
#pragma once

#include <cstdint>

#include "jit/base/aligned_buffer.h"
#include "jit/gemm/gemm_args.h"
#include "ops/quant/activation.h"

namespace qforge {

struct FloatActivations {
  std::int64_t m = 0, k = 0, k_padded = 0, group = 0;
  int bits = 8;                        // of the weights: decides the stored scaling
  bool bf16 = false;                   // bf16 pairs (int4 only) instead of scaled f32
  std::int64_t row_stride = 0;         // bytes between rows
  AlignedBuffer<float> x;              // m x row_stride / 4 floats
  AlignedBuffer<std::uint16_t> pairs;  // bf16: m x row_stride / 2 values
  AlignedBuffer<float> group_sums;     // m x groups
  // Decode calls of a layer that splits its rows (QuantizedLinear: split_activations.h)
  // quantize them here instead.
  QuantizedActivations split_rows;

  std::int64_t groups() const { return k_padded / group; }
  const float* row(std::int64_t r) const { return x.data() + r * (row_stride / 4); }
  const float* sums(std::int64_t r) const { return group_sums.data() + r * groups(); }
  const std::uint16_t* pair_row(std::int64_t r) const {
    return pairs.data() + r * (row_stride / 2);
  }
  // x[r][i] as the kernel multiplies it (the stored value times 2^e, or the bf16 value).
  float value(std::int64_t r, std::int64_t i) const;
};

// Sizes `out` for M rows of K values grouped by `group` into Kp. The buffers only grow,
// so one FloatActivations can serve every layer of a model in turn.
void prepare_float_activations(FloatActivations& out, std::int64_t m, std::int64_t k,
                               std::int64_t k_padded, std::int64_t group, int bits,
                               bool bf16 = false);

// Copies rows [first, first + count) of x (leading dimension ldx floats, x pointing at
// row 0) into `out` (zeros in [K, Kp)) and sums their groups.
// Points a kernel call's A operand at x: the f32 rows or the bf16 pairs, and the sums.
void set_call_operand(GemmCallArgs& call, const FloatActivations& x);

void copy_float_activation_rows(const float* x, std::int64_t ldx, std::int64_t first,
                                std::int64_t count, FloatActivations& out);

}  // namespace qforge
