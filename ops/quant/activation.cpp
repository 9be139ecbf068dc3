#include "ops/quant/activation.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "ops/quant/round_avx2.h"

namespace qforge {

float round_half_away(float v) {
  return std::round(v);
}

void prepare_activations(QuantizedActivations& out, std::int64_t m, std::int64_t k,
                         std::int64_t k_padded, std::int64_t group) {
  QF_REQUIRE(m > 0 && k > 0 && group > 0 && k_padded >= k && k_padded % group == 0,
             "activations: bad shape M ", m, ", K ", k, ", Kp ", k_padded, ", g ", group);
  const std::int64_t stride = static_cast<std::int64_t>(round_up(k_padded, kCacheLine));
  const bool same = out.m == m && out.k == k && out.k_padded == k_padded && out.group == group;
  if (same) return;
  out.m = m;
  out.k = k;
  out.k_padded = k_padded;
  out.group = group;
  out.row_stride = stride;
  // The buffers only grow: a layer's scratch switches between a prefill chunk and one
  // decode row every prompt. Quantization writes xq[r][0, k), the scales and the sums;
  // the padding [k, stride) of each row is zeroed here.
  out.xq.fit_for_overwrite(m * stride);
  out.scale.fit_for_overwrite(m);
  out.group_sums.fit_for_overwrite(m * (k_padded / group));
  if (stride > k)
    for (std::int64_t r = 0; r < m; ++r) std::memset(out.xq.data() + r * stride + k, 0, stride - k);
}

namespace {

float row_scale(const float* x, std::int64_t k) {
  float max_abs = 0.f;
  for (std::int64_t i = 0; i < k; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
  return max_abs / 127.f;
}

void check_finite_row(const float* x, std::int64_t k, std::int64_t row) {
  for (std::int64_t i = 0; i < k; ++i)
    QF_REQUIRE(std::isfinite(x[i]), "activations: x[", row, "][", i, "] is not finite");
}

}  // namespace

// row_scale and check_finite_row in one 8-wide pass (max is exact: the same scale).
__attribute__((target("avx2,fma"))) float checked_row_scale_avx2(const float* x, std::int64_t k,
                                                                 std::int64_t row) {
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  const __m256 infinity = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 max_abs = _mm256_setzero_ps(), not_finite = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 a = _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + i));
    not_finite = _mm256_or_ps(not_finite, _mm256_cmp_ps(a, infinity, _CMP_NLT_UQ));  // inf, NaN
    max_abs = _mm256_max_ps(max_abs, a);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max_abs);
  float m = *std::max_element(lanes, lanes + 8);
  bool finite = _mm256_movemask_ps(not_finite) == 0;
  for (; i < k; ++i) {
    finite = finite && std::isfinite(x[i]);
    m = std::max(m, std::fabs(x[i]));
  }
  if (!finite) check_finite_row(x, k, row);  // throws, naming the first such element
  return m / 127.f;
}

namespace {

// Sums xq per group for row r, reading back the bytes just written.
void row_group_sums(const QuantizedActivations& out, std::int64_t r, std::int32_t* sums) {
  for (std::int64_t j = 0; j < out.groups(); ++j) {
    std::int32_t s = 0;
    for (std::int64_t i = 0; i < out.group; ++i) s += out.value(r, j * out.group + i);
    sums[j] = s;
  }
}

// Quantizes one row and, in the same pass, adds each xq to its group's sum (when no
// 8-wide vector straddles two groups; otherwise returns false and the caller sums).
// `finite` (when not null) is cleared if some x is infinite or NaN (a static scale has no
// max pass to find them). kReciprocal (static): x * (1 / a), one multiply, not a divide.
template <bool kReciprocal>
__attribute__((target("avx2,fma"))) bool quantize_row_avx2(const float* x, std::int64_t k, float a,
                                                           std::int64_t group, std::int8_t* xq,
                                                           std::int32_t* sums, bool* finite) {
  const bool fused_sums = group % 8 == 0;
  const __m256 infinity = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 not_finite = _mm256_setzero_ps();
  // (x / a) rounded half away from zero (round_avx2.h).
  const __m256 div = _mm256_set1_ps(a);
  const float inverse = 1.f / a;
  const __m256 mul = _mm256_set1_ps(inverse);
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 xi = _mm256_loadu_ps(x + i);
    if (finite != nullptr)
      not_finite = _mm256_or_ps(
          not_finite, _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, xi), infinity, _CMP_NLT_UQ));
    const __m256 v = kReciprocal ? _mm256_mul_ps(xi, mul) : _mm256_div_ps(xi, div);
    const __m256i q_signed = _mm256_cvtps_epi32(round_half_away_clamped_avx2(v));
    if (fused_sums) {
      __m128i h =
          _mm_add_epi32(_mm256_castsi256_si128(q_signed), _mm256_extracti128_si256(q_signed, 1));
      h = _mm_hadd_epi32(h, h);
      h = _mm_hadd_epi32(h, h);
      sums[i / group] += _mm_cvtsi128_si32(h);
    }
    // 8 x int32 in [-127, 127] -> 8 bytes.
    const __m128i lo = _mm256_castsi256_si128(q_signed), hi = _mm256_extracti128_si256(q_signed, 1);
    const __m128i w = _mm_packs_epi32(lo, hi);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(xq + i), _mm_packs_epi16(w, w));
  }
  for (; i < k; ++i) {
    if (finite != nullptr && !std::isfinite(x[i])) {  // the caller throws; no float->int of NaN
      *finite = false;
      xq[i] = 0;
      continue;
    }
    const float r =
        std::clamp(round_half_away(kReciprocal ? x[i] * inverse : x[i] / a), -127.f, 127.f);
    xq[i] = static_cast<std::int8_t>(r);
    if (fused_sums) sums[i / group] += static_cast<int>(r);
  }
  if (finite != nullptr && _mm256_movemask_ps(not_finite) != 0) *finite = false;
  return fused_sums;
}

void quantize_row_scalar(const float* x, std::int64_t k, float a, std::int8_t* xq,
                         bool reciprocal) {
  const float inverse = 1.f / a;
  for (std::int64_t i = 0; i < k; ++i)
    xq[i] = static_cast<std::int8_t>(
        std::clamp(round_half_away(reciprocal ? x[i] * inverse : x[i] / a), -127.f, 127.f));
}

// Row r of `out` from `row` (K floats). static_scale > 0: that scale (no max pass); 0: the
// row's own.
template <bool kUseAvx2>
void quantize_row(const float* row, std::int64_t r, float static_scale, QuantizedActivations& out) {
  const bool fixed = static_scale > 0.f;
  float a;
  if (fixed) {
    a = static_scale;
    if (!kUseAvx2) check_finite_row(row, out.k, r);
  } else if (kUseAvx2) {
    a = checked_row_scale_avx2(row, out.k, r);
  } else {
    check_finite_row(row, out.k, r);
    a = row_scale(row, out.k);
  }
  std::int8_t* xq = out.xq.data() + r * out.row_stride;
  std::int32_t* sums = out.group_sums.data() + r * out.groups();
  out.scale[r] = a;
  std::fill(sums, sums + out.groups(), 0);
  bool sums_done = a == 0.f;
  if (a == 0.f) {
    std::memset(xq, 0, out.k);
  } else if (kUseAvx2) {
    bool finite = true;
    sums_done = fixed ? quantize_row_avx2<true>(row, out.k, a, out.group, xq, sums, &finite)
                      : quantize_row_avx2<false>(row, out.k, a, out.group, xq, sums, nullptr);
    if (!finite) check_finite_row(row, out.k, r);  // throws, naming the element
  } else {
    quantize_row_scalar(row, out.k, a, xq, fixed);
  }
  if (!sums_done) row_group_sums(out, r, sums);
}

// Rows [first, end) of x (every row by default).
template <bool kUseAvx2>
void quantize_rows(const float* x, std::int64_t ldx, QuantizedActivations& out,
                   float static_scale = 0.f, std::int64_t first = 0, std::int64_t end = -1) {
  QF_REQUIRE(x != nullptr, "activations: input pointer is null");
  if (end < 0) end = out.m;
  for (std::int64_t r = first; r < end; ++r)
    quantize_row<kUseAvx2>(x + r * ldx, r, static_scale, out);
}

// Rows [first, end) of rmsnorm(x): each row normalized into a per-thread row buffer that
// stays in cache, then quantized from there.
template <bool kUseAvx2>
void quantize_normalized(const float* x, std::int64_t ldx, const RmsNorm& norm,
                         QuantizedActivations& out, float static_scale, std::int64_t first,
                         std::int64_t end) {
  QF_REQUIRE(x != nullptr && norm.weight != nullptr, "activations: input or norm weight is null");
  static thread_local std::vector<float> normalized;
  if (normalized.size() < static_cast<std::size_t>(out.k))
    normalized.resize(static_cast<std::size_t>(out.k));
  for (std::int64_t r = first; r < end; ++r) {
    rmsnorm(normalized.data(), x + r * ldx, norm, out.k);
    quantize_row<kUseAvx2>(normalized.data(), r, static_scale, out);
  }
}

void check_rows(std::int64_t first, std::int64_t count, const QuantizedActivations& out) {
  QF_REQUIRE(first >= 0 && count >= 0 && first + count <= out.m, "activations: rows [", first, ", ",
             first + count, ") outside the ", out.m, " prepared");
}

}  // namespace

void quantize_activations(const float* x, std::int64_t ldx, QuantizedActivations& out) {
  quantize_activation_rows(x, ldx, 0.f, 0, out.m, out);
}

void quantize_activations_reference(const float* x, std::int64_t ldx, QuantizedActivations& out) {
  quantize_rows<false>(x, ldx, out);
}

namespace {

void check_static_scale(float scale) {
  QF_REQUIRE(std::isfinite(scale) && scale > 0.f, "activations: static scale ", scale,
             " is not a positive finite number");
}

}  // namespace

void quantize_activations_static(const float* x, std::int64_t ldx, float scale,
                                 QuantizedActivations& out) {
  check_static_scale(scale);
  quantize_activation_rows(x, ldx, scale, 0, out.m, out);
}

void quantize_activations_static_reference(const float* x, std::int64_t ldx, float scale,
                                           QuantizedActivations& out) {
  check_static_scale(scale);
  quantize_rows<false>(x, ldx, out, scale);
}

void quantize_activation_rows(const float* x, std::int64_t ldx, float static_scale,
                              std::int64_t first, std::int64_t count, QuantizedActivations& out) {
  check_rows(first, count, out);
  if (static_scale != 0.f) check_static_scale(static_scale);
  if (cpu_info().isa.avx2)
    quantize_rows<true>(x, ldx, out, static_scale, first, first + count);
  else
    quantize_rows<false>(x, ldx, out, static_scale, first, first + count);
}

void quantize_normalized_rows(const float* x, std::int64_t ldx, const RmsNorm& norm,
                              float static_scale, std::int64_t first, std::int64_t count,
                              QuantizedActivations& out) {
  check_rows(first, count, out);
  if (static_scale != 0.f) check_static_scale(static_scale);
  if (cpu_info().isa.avx2)
    quantize_normalized<true>(x, ldx, norm, out, static_scale, first, first + count);
  else
    quantize_normalized<false>(x, ldx, norm, out, static_scale, first, first + count);
}

}  // namespace qforge
