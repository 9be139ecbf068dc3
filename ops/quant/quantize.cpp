#include "ops/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/aligned_buffer.h"
#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "ops/quant/packed_layout.h"

namespace qforge {

GroupParams choose_group_params(const float* values, std::int64_t count, int bits,
                                bool asymmetric) {
  float lo = 0.f, hi = 0.f;  // the range always includes 0
  for (std::int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  return group_params_from_range(lo, hi, bits, asymmetric);
}

float round_scale_to_f16(float scale) {
  // Non-finite weights make a non-finite scale; the callers name the weight.
  if (!std::isfinite(scale)) return scale;
  QF_REQUIRE(scale <= kLargestF16, "quantize: a group needs the scale ", scale,
             ", beyond the f16 scales of the packed layout (at most ", kLargestF16,
             "; |w| up to 65504 x the q range)");
  std::uint16_t half = f32_to_f16(scale);
  // Up, never down: |w| / s then stays within the q range, and the error within s / 2.
  // Positive f16 bit patterns are ordered like their values.
  if (f16_to_f32(half) < scale) ++half;
  return f16_to_f32(half);
}

GroupParams group_params_from_range(float lo, float hi, int bits, bool asymmetric) {
  GroupParams p;
  if (!asymmetric) {
    //   d > 0 (extreme lo):  q in -8 ...  0 ... 7   ->  q d in [lo, 7/8 |lo|]
    //   d < 0 (extreme hi):  q in -8 ...  0 ... 7   ->  q d in [-7/8 hi, hi]
    const float max_abs = std::max(-lo, hi);
    if (extra_negative_level(bits, false)) {
      p.scale = round_scale_to_f16(max_abs / static_cast<float>(-quantize_min(bits, false)));
      if (hi > -lo) p.scale = -p.scale;
      return p;
    }
    p.scale = round_scale_to_f16(max_abs / static_cast<float>(stored_max(bits, false)));
    return p;
  }
  const int q_max = stored_max(bits, true);
  p.scale = round_scale_to_f16((hi - lo) / static_cast<float>(q_max));
  if (p.scale > 0.f)
    p.zero_point = static_cast<int>(std::clamp(std::round(-lo / p.scale), 0.f, float(q_max)));
  return p;
}

GroupParams two_level_params(int sub_scale, float super_scale, int sub_offset, float super_offset) {
  GroupParams p;
  p.sub_scale = static_cast<std::int8_t>(sub_scale);
  p.sub_offset = static_cast<std::int8_t>(sub_offset);
  p.super_scale = super_scale;
  p.super_offset = super_offset;
  p.scale = static_cast<float>(sub_scale) * super_scale;  // exact: 11 x 8 significant bits
  p.offset = static_cast<float>(sub_offset) * super_offset;
  return p;
}

float asymmetric_offset(const GroupParams& p, int bits) {
  const int zero_coef = bits == 8 ? 128 - p.zero_point : -p.zero_point;
  const float offset = p.scale * static_cast<float>(zero_coef) + p.offset;
  QF_REQUIRE(std::fabs(offset) <= kLargestF16, "quantize: an asymmetric group needs the offset ",
             offset, ", beyond the f16 offsets of the packed layout (at most ", kLargestF16, ")");
  return f16_to_f32(f32_to_f16(offset));
}

int quantize_value(float value, const GroupParams& p, int bits, bool asymmetric) {
  if (p.scale == 0.f) return 0;
  const float r = std::round(value / p.scale);
  if (!asymmetric) {
    const float q_min = static_cast<float>(quantize_min(bits, false));
    const float q_max = static_cast<float>(stored_max(bits, false));
    return static_cast<int>(std::clamp(r, q_min, q_max));
  }
  const float q_max = static_cast<float>(stored_max(bits, true));
  return static_cast<int>(std::clamp(r + static_cast<float>(p.zero_point), 0.f, q_max));
}

void require_finite(const float* values, std::int64_t count, const char* what) {
  // A branch-free scan (vectorises) for an all-ones exponent; locate only on failure.
  std::uint32_t non_finite = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, values + i, 4);
    non_finite |= (bits & 0x7f800000u) == 0x7f800000u;
  }
  if (!non_finite) return;
  for (std::int64_t i = 0; i < count; ++i)
    QF_REQUIRE(std::isfinite(values[i]), what, ": element ", i, " is not finite (", values[i], ")");
}

QuantizedTensor zero_quantized_tensor(std::int64_t n, std::int64_t k, const QuantScheme& scheme) {
  const PackedHeader h = make_packed_header(n, k, scheme);
  QuantizedTensor t;
  t.scheme = scheme;
  t.n = n;
  t.k = k;
  t.k_padded = h.k_padded;
  t.group = h.group;
  t.q.assign(static_cast<std::size_t>(n * t.k_padded), 0);
  t.scales.assign(static_cast<std::size_t>(n * t.groups()), 0.f);
  t.zero_points.assign(static_cast<std::size_t>(n * t.groups()), 0);
  return t;
}

QuantizedTensor quantize_reference(const float* weights, std::int64_t n, std::int64_t k,
                                   const QuantScheme& scheme) {
  QF_REQUIRE(weights != nullptr, "quantize: weights pointer is null");
  QF_REQUIRE(!scheme.two_level(), "quantize: the reference quantizer has one-level scales; ",
             to_string(scheme), " is packed by pack_weights");
  QuantizedTensor t = zero_quantized_tensor(n, k, scheme);

  std::vector<float> row(t.k_padded, 0.f);  // zero-padded copy of one row
  for (std::int64_t r = 0; r < n; ++r) {
    std::copy(weights + r * k, weights + (r + 1) * k, row.begin());
    for (std::int64_t c = 0; c < k; ++c)
      QF_REQUIRE(std::isfinite(row[c]), "quantize: weight [", r, "][", c, "] is not finite (",
                 row[c], ")");
    if (scheme.granularity == Granularity::per_tensor) continue;
    for (std::int64_t j = 0; j < t.groups(); ++j) {
      const float* values = row.data() + j * t.group;
      const GroupParams p = choose_group_params(values, t.group, scheme.bits, scheme.asymmetric);
      t.scales[r * t.groups() + j] = p.scale;
      t.zero_points[r * t.groups() + j] = p.zero_point;
      for (std::int64_t i = 0; i < t.group; ++i)
        t.q[r * t.k_padded + j * t.group + i] =
            static_cast<std::int16_t>(quantize_value(values[i], p, scheme.bits, scheme.asymmetric));
    }
  }
  if (scheme.granularity == Granularity::per_tensor) {
    // One scale for everything: parameters from all of W, then quantize every row.
    const GroupParams p = choose_group_params(weights, n * k, scheme.bits, scheme.asymmetric);
    std::fill(t.scales.begin(), t.scales.end(), p.scale);
    std::fill(t.zero_points.begin(), t.zero_points.end(), p.zero_point);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < t.k_padded; ++c)
        t.q[r * t.k_padded + c] = static_cast<std::int16_t>(
            quantize_value(c < k ? weights[r * k + c] : 0.f, p, scheme.bits, scheme.asymmetric));
  }
  return t;
}

std::vector<float> dequantize(const QuantizedTensor& t) {
  std::vector<float> w(t.n * t.k);
  const int bits = t.scheme.bits;
  const bool asym = t.scheme.asymmetric;
  // Symmetric: w = s * q. Asymmetric, as the packed layout holds it: w = s * v + offset
  // with v = q - 128 (int8) or q (int4) and the f16 offset of asymmetric_offset().
  const int v_shift = asym && bits == 8 ? 128 : 0;
  for (std::int64_t r = 0; r < t.n; ++r)
    for (std::int64_t c = 0; c < t.k; ++c) {
      const std::int64_t g = r * t.groups() + c / t.group;
      const float v = static_cast<float>(t.q[r * t.k_padded + c] - v_shift);
      if (!asym) {
        w[r * t.k + c] = t.scales[g] * v;
        continue;
      }
      if (t.scheme.two_level()) {  // the exact product sub_offset * super_offset
        w[r * t.k + c] = t.scales[g] * v + t.offsets[g];
        continue;
      }
      const GroupParams p{t.scales[g], t.zero_points[g], t.offsets.empty() ? 0.f : t.offsets[g]};
      w[r * t.k + c] = t.scales[g] * v + asymmetric_offset(p, bits);
    }
  return w;
}

}  // namespace qforge
