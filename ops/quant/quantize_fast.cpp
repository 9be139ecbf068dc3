#include "ops/quant/quantize_fast.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "jit/cpu/cpu_info.h"

namespace qforge {
namespace {

bool use_avx2() {
  static const bool avx2 = cpu_info().isa.avx2;
  return avx2;
}

// The range of v (including 0); returns false if any value is infinite or NaN (an
// all-ones exponent), checked in the same pass.
__attribute__((target("avx2"))) bool min_max_avx2(const float* v, std::int64_t count, float* lo,
                                                  float* hi) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();  // the range includes 0
  const __m256i exponent = _mm256_set1_epi32(0x7f800000);
  __m256i bad = _mm256_setzero_si256();
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_loadu_ps(v + i);
    vlo = _mm256_min_ps(vlo, x);
    vhi = _mm256_max_ps(vhi, x);
    const __m256i e = _mm256_and_si256(_mm256_castps_si256(x), exponent);
    bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exponent));
  }
  float l[8], h[8];
  _mm256_storeu_ps(l, vlo);
  _mm256_storeu_ps(h, vhi);
  float a = 0.f, b = 0.f;
  for (int j = 0; j < 8; ++j) a = std::min(a, l[j]), b = std::max(b, h[j]);
  bool finite = _mm256_testz_si256(bad, bad) != 0;
  for (; i < count; ++i) {
    a = std::min(a, v[i]), b = std::max(b, v[i]);
    finite = finite && std::isfinite(v[i]);
  }
  *lo = a;
  *hi = b;
  return finite;
}

// operands[i] = clamp(round_half_away(v[i] / s) + z, q_min, q_max) + offset, as u8.
__attribute__((target("avx2"))) void quantize_avx2(const float* v, std::int64_t count, float scale,
                                                   float zero, float q_min, float q_max, int offset,
                                                   std::uint8_t* operands) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero);
  const __m256 lo = _mm256_set1_ps(q_min), hi = _mm256_set1_ps(q_max);
  const __m256i off = _mm256_set1_epi32(offset);
  std::int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_div_ps(_mm256_loadu_ps(v + i), s);
    const __m256 t = _mm256_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_sub_ps(x, t);  // exact
    const __m256 step =
        _mm256_round_ps(_mm256_add_ps(f, f), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_add_ps(_mm256_add_ps(t, step), z);
    const __m256i n = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi)),
                                       off);  // in [0, 255]
    const __m128i words =
        _mm_packs_epi32(_mm256_castsi256_si128(n), _mm256_extracti128_si256(n, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(operands + i), _mm_packus_epi16(words, words));
  }
  for (; i < count; ++i) {
    const float r = round_half_away_scalar(v[i] / scale) + zero;
    const int operand = static_cast<int>(std::clamp(r, q_min, q_max)) + offset;
    operands[i] = static_cast<std::uint8_t>(operand);
  }
}

}  // namespace

GroupParams choose_group_params_fast(const float* values, std::int64_t count, int bits,
                                     bool asymmetric, bool* finite) {
  if (!use_avx2()) {
    if (finite)
      *finite = std::all_of(values, values + count, [](float v) { return std::isfinite(v); });
    return choose_group_params(values, count, bits, asymmetric);
  }
  float lo, hi;
  const bool all_finite = min_max_avx2(values, count, &lo, &hi);
  if (finite) *finite = all_finite;
  return group_params_from_range(lo, hi, bits, asymmetric);
}

void quantize_operands_fast(const float* values, std::int64_t count, std::int64_t group,
                            const GroupParams& p, int bits, bool asymmetric, int offset,
                            std::uint8_t* operands) {
  if (!use_avx2() || p.scale == 0.f) {
    for (std::int64_t i = 0; i < count; ++i)
      operands[i] =
          static_cast<std::uint8_t>(quantize_value(values[i], p, bits, asymmetric) + offset);
  } else {
    const float q_min = static_cast<float>(quantize_min(bits, asymmetric));
    const float q_max = static_cast<float>(stored_max(bits, asymmetric));
    quantize_avx2(values, count, p.scale, asymmetric ? float(p.zero_point) : 0.f, q_min, q_max,
                  offset, operands);
  }
  const int padding = quantize_value(0.f, p, bits, asymmetric) + offset;
  std::fill(operands + count, operands + group, static_cast<std::uint8_t>(padding));
}

}  // namespace qforge
