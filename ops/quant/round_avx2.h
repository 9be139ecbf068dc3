// The activation quantizers' rounding, 8 floats at once: clamp(round_half_away(v), -127,
// 127) as floats (activation.h's definition; AVX2, for the quantizers' avx2 paths).
#pragma once

#include <immintrin.h>

namespace qforge {

__attribute__((target("avx2,fma"))) inline __m256 round_half_away_clamped_avx2(__m256 v) {
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  // t = trunc(v); t += sign(v) where |v - t| >= 0.5
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_andnot_ps(sign_bit, _mm256_sub_ps(v, t));
  const __m256 step = _mm256_or_ps(_mm256_and_ps(sign_bit, v), _mm256_set1_ps(1.f));
  const __m256 r =
      _mm256_add_ps(t, _mm256_and_ps(_mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ), step));
  return _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(-127.f)), _mm256_set1_ps(127.f));
}

}  // namespace qforge
