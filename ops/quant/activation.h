// Per-row (per-token) activation quantization, the kernels' A operand.
//
//   a[m]  = max_k |x[m][k]| / 127                       (dynamic: the row's scale; 0 for
//                                                        a zero row)
//         = a                                           (static: one scale from
//                                                        calibration, no max pass;
//                                                        larger values clamp)
//   xq    = clamp(round(x / a), -127, 127)              (round half away from zero;
//                                                        static: round(x * (1 / a)), the
//                                                        reciprocal once in float)
//   xsum[m][j] = sum of xq over group j                 (the operand-bias correction:
//                                                        ops/quant/packed_layout.h)
//
// Every kernel reads the signed bytes xq: vpdpbusd / tdpbsud multiply the weights' u8
// operands by them, the AVX2 kernels use them in their signed sequence.
//
// Row m starts at m * row_stride (a multiple of 64 >= Kp); k in [K, Kp) holds xq = 0,
// so padded weights contribute nothing and kernels need no K tail for A.
#pragma once

#include <cstdint>

#include "jit/base/aligned_buffer.h"
#include "ops/norm/rmsnorm.h"

namespace qforge {

struct QuantizedActivations {
  std::int64_t m = 0, k = 0, k_padded = 0, group = 0;
  std::int64_t row_stride = 0;             // bytes between rows of xq
  AlignedBuffer<std::int8_t> xq;           // m x row_stride bytes
  AlignedBuffer<float> scale;              // m
  AlignedBuffer<std::int32_t> group_sums;  // m x groups

  std::int64_t groups() const { return k_padded / group; }
  const std::int8_t* row(std::int64_t r) const { return xq.data() + r * row_stride; }
  const std::int32_t* sums(std::int64_t r) const { return group_sums.data() + r * groups(); }
  // xq of row r, element i.
  int value(std::int64_t r, std::int64_t i) const { return row(r)[i]; }
};

// Sizes `out` for M rows of K values grouped by `group` into Kp = k_padded (no-op when
// nothing changed, so buffers are reused across calls).
void prepare_activations(QuantizedActivations& out, std::int64_t m, std::int64_t k,
                         std::int64_t k_padded, std::int64_t group);

// Quantizes x (M rows, leading dimension ldx floats) into `out` (already prepared).
// Uses AVX2 when the CPU has it (group sums fused into the same pass); bit-identical to
// the reference.
void quantize_activations(const float* x, std::int64_t ldx, QuantizedActivations& out);
void quantize_activations_reference(const float* x, std::int64_t ldx, QuantizedActivations& out);
// Static: every row with scale `scale` (> 0, finite); a non-finite x still throws.
void quantize_activations_static(const float* x, std::int64_t ldx, float scale,
                                 QuantizedActivations& out);
void quantize_activations_static_reference(const float* x, std::int64_t ldx, float scale,
                                           QuantizedActivations& out);
// Rows [first, first + count) of either (static_scale 0: dynamic), x still pointing at
// row 0: what a thread of a split call quantizes; the rows match a whole call bit for bit.
void quantize_activation_rows(const float* x, std::int64_t ldx, float static_scale,
                              std::int64_t first, std::int64_t count, QuantizedActivations& out);

// The same rows of rmsnorm(x) (ops/norm/rmsnorm.h), each normalized in a per-thread row
// buffer and quantized from there: the normalized f32 rows never go to memory. Bit for bit
// rmsnorm into a buffer and quantize_activation_rows of that buffer.
void quantize_normalized_rows(const float* x, std::int64_t ldx, const RmsNorm& norm,
                              float static_scale, std::int64_t first, std::int64_t count,
                              QuantizedActivations& out);

// max |x| / 127 of one row of K values (AVX2, the CPU must have it); throws qforge::Error
// naming x[row][i] for the first value that is not finite.
float checked_row_scale_avx2(const float* x, std::int64_t k, std::int64_t row);

// Rounds half away from zero; the single definition both paths follow.
float round_half_away(float v);

}  // namespace qforge
