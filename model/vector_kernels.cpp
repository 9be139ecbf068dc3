#include "model/vector_kernels.h"

#include <immintrin.h>

#include "jit/cpu/cpu_info.h"

namespace qforge {
namespace {

bool use_avx2() {
  static const bool avx2 = cpu_info().isa.avx2 && cpu_info().isa.fma;
  return avx2;
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  if (i + 8 <= n) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    i += 8;
  }
  const __m256 s = _mm256_add_ps(s0, s1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_movehdup_ps(h));
  float sum = _mm_cvtss_f32(h);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

__attribute__((target("avx2,fma"))) void add_scaled_avx2(float* y, float s, const float* x, int n) {
  const __m256 sv = _mm256_set1_ps(s);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(sv, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += s * x[i];
}

}  // namespace

float dot(const float* a, const float* b, int n) {
  if (use_avx2()) return dot_avx2(a, b, n);
  float sum = 0.f;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void add_scaled(float* y, float s, const float* x, int n) {
  if (use_avx2()) return add_scaled_avx2(y, s, x, n);
  for (int i = 0; i < n; ++i) y[i] += s * x[i];
}

}  // namespace qforge
