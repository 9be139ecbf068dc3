// Weight-only decode on the integer dot products: each f32 activation row split into D
// s8 digit rows, each quantized like any per-token row (activation.h) from what the
// digits before it left:
//
//   r_0 = x
//   q_d = round(r_d / a_d),  a_d = max |r_d| / 127          d = 0 .. D-1
//   r_{d+1} = r_d - a_d q_d                                  (|r_{d+1}| <= a_d / 2, one fma)
//
//   x = a_0 q_0 + ... + a_{D-1} q_{D-1} + r_D,   |r_D| <= max |x| / (2 * 127 * 254^(D-1))
//
// D = 2 leaves x to 1/64516 of its row's largest value (finer than bf16's 2^-9 of each
// value; what QuantizedLinear splits into, kWeightOnlySplitDigits), D = 3 to 1/16387064
// (f32's own rounding, 2^-24). A split kernel (GemmKey
// activation s8x2 / s8x3) multiplies every digit row by the packed weights with the
// integer dot products and sums the rows' scaled outputs into one row, so weight-only
// decode streams its weights at the W8A8 kernels' rate instead of converting each
// weight to float.
//
//   out rows:  [row 0 digit 0][row 0 digit 1]..[row 0 digit D-1][row 1 digit 0]...
#pragma once

#include <cstdint>

#include "ops/quant/activation.h"

namespace qforge {

// Sizes `out` for M rows of D digit rows each (out.m = M * D).
void prepare_split_activations(QuantizedActivations& out, int digits, std::int64_t m,
                               std::int64_t k, std::int64_t k_padded, std::int64_t group);

// Splits rows [first, first + count) of x (leading dimension ldx floats, x at row 0) into
// their digit rows [first * D, (first + count) * D) of `out`; throws qforge::Error for a
// non-finite x.
void split_activation_rows(const float* x, std::int64_t ldx, int digits, std::int64_t first,
                           std::int64_t count, QuantizedActivations& out);

}  // namespace qforge
