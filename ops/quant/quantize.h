// Weight quantization, the arithmetic of DESIGN.md in one place (scalar, obviously right).
//
//   int8 sym : s = max|w| / 127,  q = clamp(round(w / s), -127, 127)
//   int8 asym: s = (max - min) / 255, z = clamp(round(-min / s), 0, 255),
//              q = clamp(round(w / s) + z, 0, 255)          (w ~ s * (q - z))
//   int4 sym : s = max|w| / 7,    q = clamp(round(w / s), -8, 7)
//   int4 asym: s = (max - min) / 15, z in [0, 15], q in [0, 15]
// The scale is rounded up to an f16 (the packed layout stores f16; a scale past 65504
// is an error) and q is computed against the rounded scale.
// round = half away from zero (std::round). The asymmetric range is widened to include
// 0 (min <= 0 <= max) so that z fits and zero is exact. A group whose scale is 0 (all
// zeros, or values so small the scale underflows) gets q = 0 (z = 0).
#pragma once

#include <cstdint>
#include <vector>

#include "ops/quant/scheme.h"

namespace qforge {

// Parameters of one quantized group.
struct GroupParams {
  float scale = 0.f;
  int zero_point = 0;  // 0 for symmetric schemes
  float offset = 0.f;  // int4 asymmetric with a float minimum (GGUF Q4_1): w = scale * q + offset
  // Two-level scales (packed_layout.h): scale = sub_scale * super_scale and offset =
  // sub_offset * super_offset exactly, the super values f16 and shared by a super-block.
  std::int8_t sub_scale = 0, sub_offset = 0;
  float super_scale = 0.f, super_offset = 0.f;
};
// The parameters of a two-level group: scale and offset formed from the parts.
GroupParams two_level_params(int sub_scale, float super_scale, int sub_offset, float super_offset);
// The float term an asymmetric group's weights carry beside scale * v (see
// ops/quant/packed_layout.h): scale * (128 - z) for int8, -scale * z + offset for int4,
// rounded to f16 as the packed layout stores it.
float asymmetric_offset(const GroupParams& params, int bits);

// Computes the scale (and zero point) of `count` values under `scheme`'s bits/symmetry.
GroupParams choose_group_params(const float* values, std::int64_t count, int bits, bool asymmetric);
// A scale as the packed layout stores it: the nearest f16 at or above it (throws beyond
// 65504).
float round_scale_to_f16(float scale);
// The parameters for values spanning [lo, hi] (lo <= 0 <= hi). Symmetric schemes whose
// stored range has one level more below zero than above (int4: [-8, 7]) put the extreme
// of larger magnitude on that level, with a negative scale when the extreme is positive
// (Q4_0's convention, d = extreme / -8): all 16 levels in use, where absmax / 7 leaves -8
// idle. int8 quantizes into [-127, 127]: absmax / 127.
GroupParams group_params_from_range(float lo, float hi, int bits, bool asymmetric);
// Round half away from zero (std::round): the one rounding rule of qforge.
inline float round_half_away_scalar(float v) {
  return __builtin_roundf(v);
}
// Quantizes one value with the given parameters.
int quantize_value(float value, const GroupParams& params, int bits, bool asymmetric);

// An unpacked quantized tensor: the oracle form that packing writes and unpacking reads.
struct QuantizedTensor {
  QuantScheme scheme;
  std::int64_t n = 0, k = 0;              // logical shape
  std::int64_t k_padded = 0;              // Kp (multiple of group)
  std::int64_t group = 0;                 // effective g
  std::vector<std::int16_t> q;            // n x k_padded stored values (range per the table above)
  std::vector<float> scales;              // n x (k_padded / group)
  std::vector<std::int32_t> zero_points;  // n x groups (all 0 when symmetric)
  // Empty, or n x groups float minima of an int4 asymmetric tensor (GGUF Q4_1):
  // w = scale * (q - zero_point) + offset. Integer zero points cannot hold them.
  std::vector<float> offsets;

  std::int64_t groups() const { return k_padded / group; }
};

// The geometry of `scheme` for an n x k matrix (k_padded, group) with every value, scale
// and zero point 0: what a quantizer fills in.
QuantizedTensor zero_quantized_tensor(std::int64_t n, std::int64_t k, const QuantScheme& scheme);

// Reference quantization of the row-major N x K float matrix (checks every value is
// finite: NaN/Inf is an error naming the row and column).
QuantizedTensor quantize_reference(const float* weights, std::int64_t n, std::int64_t k,
                                   const QuantScheme& scheme);
// The weights the packed layout holds, N x K (padding dropped): s * q (symmetric), or
// s * v + f16 offset (asymmetric: packed_layout.h), which is s * (q - z) (+ offset) up to
// the offset's f16 rounding.
std::vector<float> dequantize(const QuantizedTensor& tensor);

// Checks that `count` floats are finite; throws naming `what` and the index otherwise.
void require_finite(const float* values, std::int64_t count, const char* what);

}  // namespace qforge
