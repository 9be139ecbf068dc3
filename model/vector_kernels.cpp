#include "model/vector_kernels.h"

#include <immintrin.h>

#include <cmath>

#include "jit/cpu/cpu_info.h"

namespace qforge {
namespace {

bool use_avx2() {
  static const bool avx2 = cpu_info().isa.avx2 && cpu_info().isa.fma;
  return avx2;
}

__attribute__((target("avx2,fma"), always_inline)) inline float dot_avx2(const float* a,
                                                                         const float* b, int n) {
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

__attribute__((target("avx2,fma"))) void dot_rows_avx2(const float* q, const float* k,
                                                       std::int64_t stride, int count, int n,
                                                       float divisor, float* scores) {
  for (int p = 0; p < count; ++p) scores[p] = dot_avx2(q, k + p * stride, n) / divisor;
}

// y[i0 .. i0 + 8 * V) in V registers, positions added in order.
template <int V>
__attribute__((target("avx2,fma"), always_inline)) inline void weighted_block(const float* w,
                                                                              const float* v,
                                                                              std::int64_t stride,
                                                                              int count, float* y) {
  __m256 acc[V];
  for (int j = 0; j < V; ++j) acc[j] = _mm256_setzero_ps();
  for (int p = 0; p < count; ++p) {
    const __m256 weight = _mm256_set1_ps(w[p]);
    const float* row = v + p * stride;
    for (int j = 0; j < V; ++j)
      acc[j] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(row + 8 * j), acc[j]);
  }
  for (int j = 0; j < V; ++j) _mm256_storeu_ps(y + 8 * j, acc[j]);
}

__attribute__((target("avx2,fma"))) void weighted_rows_avx2(const float* w, const float* v,
                                                            std::int64_t stride, int count, int n,
                                                            float* y) {
  int i = 0;
  for (; i + 64 <= n; i += 64) weighted_block<8>(w, v + i, stride, count, y + i);
  for (; i + 8 <= n; i += 8) weighted_block<1>(w, v + i, stride, count, y + i);
  for (; i < n; ++i) {
    float sum = 0.f;
    for (int p = 0; p < count; ++p) sum = std::fma(w[p], v[p * stride + i], sum);
    y[i] = sum;
  }
}

}  // namespace

void dot_rows(const float* q, const float* k, std::int64_t stride, int count, int n, float divisor,
              float* scores) {
  if (use_avx2()) return dot_rows_avx2(q, k, stride, count, n, divisor, scores);
  for (int p = 0; p < count; ++p) {
    float sum = 0.f;
    for (int i = 0; i < n; ++i) sum += q[i] * k[p * stride + i];
    scores[p] = sum / divisor;
  }
}

void weighted_rows(const float* w, const float* v, std::int64_t stride, int count, int n,
                   float* y) {
  if (use_avx2()) return weighted_rows_avx2(w, v, stride, count, n, y);
  for (int i = 0; i < n; ++i) {
    float sum = 0.f;
    for (int p = 0; p < count; ++p) sum += w[p] * v[p * stride + i];
    y[i] = sum;
  }
}

}  // namespace qforge
