// Dynamic per-row (per-token) activation quantization, the kernels' A operand.
//
//   a[m]  = max_k |x[m][k]| / 127                       (row scale; 0 for a zero row)
//   xq    = clamp(round(x / a), -127, 127)              (round half away from zero)
//   xsum[m][j] = sum of xq over group j                 (the zero-point correction term)
//
// and the bytes of a row in one of two forms, the one its kernel reads:
//
//   offset_u8  xu = xq + 128   vpdpbusd / tdpbusd multiply u8 by s8 (VNNI, AMX kernels;
//                              they subtract 128 * sum(w), the trailer's comp)
//   signed_s8  xq              the AVX2 kernels multiply |w| by xq * sign(w)
//
// Row m starts at m * row_stride (a multiple of 64 >= Kp); k in [K, Kp) holds xq = 0,
// so padded weights contribute nothing and kernels need no K tail for A.
#pragma once

#include <cstdint>

#include "jit/base/aligned_buffer.h"
#include "jit/cpu/isa.h"

namespace qforge {

enum class ActivationForm : std::uint8_t { offset_u8, signed_s8 };
// The form the kernels of `isa` read (the reference reads either).
ActivationForm activation_form_of(Isa isa);

struct QuantizedActivations {
  std::int64_t m = 0, k = 0, k_padded = 0, group = 0;
  ActivationForm form = ActivationForm::offset_u8;
  std::int64_t row_stride = 0;             // bytes between rows of xu
  AlignedBuffer<std::uint8_t> xu;          // m x row_stride bytes, in `form`
  AlignedBuffer<float> scale;              // m
  AlignedBuffer<std::int32_t> group_sums;  // m x groups

  std::int64_t groups() const { return k_padded / group; }
  const std::uint8_t* row(std::int64_t r) const { return xu.data() + r * row_stride; }
  const std::int32_t* sums(std::int64_t r) const { return group_sums.data() + r * groups(); }
  // xq of row r, element i, whatever the form.
  int value(std::int64_t r, std::int64_t i) const {
    const std::uint8_t byte = row(r)[i];
    return form == ActivationForm::offset_u8 ? int{byte} - 128
                                             : int{static_cast<std::int8_t>(byte)};
  }
};

// Sizes `out` for M rows of K values grouped by `group` into Kp = k_padded, in `form`
// (no-op when nothing changed, so buffers are reused across calls).
void prepare_activations(QuantizedActivations& out, std::int64_t m, std::int64_t k,
                         std::int64_t k_padded, std::int64_t group,
                         ActivationForm form = ActivationForm::offset_u8);

// Quantizes x (M rows, leading dimension ldx floats) into `out` (already prepared).
// Uses AVX2 when the CPU has it (group sums fused into the same pass); bit-identical to
// the reference.
void quantize_activations(const float* x, std::int64_t ldx, QuantizedActivations& out);
void quantize_activations_reference(const float* x, std::int64_t ldx, QuantizedActivations& out);

// Rounds half away from zero; the single definition both paths follow.
float round_half_away(float v);

}  // namespace qforge
