#include "calib/gptq_group_loss.h"

#include <algorithm>

#include <immintrin.h>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "ops/quant/scheme.h"

namespace qforge {
namespace {

void check(int ranges) {
  QF_REQUIRE(ranges >= 1 && ranges <= kClipLanes, "GPTQ clipping search: ", ranges,
             " ranges (1 .. ", kClipLanes, ")");
}

// std::round (half away from zero) of four floats: truncate, then step away from zero
// where the dropped fraction (exact: x - trunc(x)) is at least one half.
__attribute__((target("avx2"))) inline __m128 round_half_away(__m128 x) {
  const __m128 sign = _mm_set1_ps(-0.f);
  const __m128 t = _mm_round_ps(x, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m128 half =
      _mm_cmp_ps(_mm_andnot_ps(sign, _mm_sub_ps(x, t)), _mm_set1_ps(0.5f), _CMP_GE_OQ);
  const __m128 step = _mm_or_ps(_mm_and_ps(x, sign), _mm_set1_ps(1.f));  // +-1 as x
  return _mm_add_ps(t, _mm_and_ps(half, step));
}

}  // namespace

void gptq_group_losses_scalar(const float* values, std::int64_t count, const double* u,
                              std::int64_t ld, const GroupParams* params, int ranges, int bits,
                              bool asymmetric, double* loss, std::vector<double>& scratch) {
  check(ranges);
  const auto R = static_cast<std::size_t>(ranges);
  scratch.resize(static_cast<std::size_t>(count) * R);
  double* __restrict w = scratch.data();
  for (std::size_t i = 0; i < std::size_t(count); ++i)
    for (std::size_t r = 0; r < R; ++r) w[i * R + r] = values[i];
  std::fill(loss, loss + ranges, 0.0);
  double e[kClipLanes];
  for (std::int64_t i = 0; i < count; ++i) {
    const double* ui = u + i * ld;
    for (std::size_t r = 0; r < R; ++r) {
      const double wi = w[std::size_t(i) * R + r];
      const int q = quantize_value(static_cast<float>(wi), params[r], bits, asymmetric);
      const double deq =
          static_cast<double>(params[r].scale) * (asymmetric ? q - params[r].zero_point : q);
      e[r] = (wi - deq) / ui[i];
      loss[r] += e[r] * e[r];
    }
    for (std::int64_t j = i + 1; j < count; ++j)
      for (std::size_t r = 0; r < R; ++r) w[std::size_t(j) * R + r] -= e[r] * ui[j];
  }
}

__attribute__((target("avx2"))) void gptq_group_losses_avx2(const float* values, std::int64_t count,
                                                            const double* u, std::int64_t ld,
                                                            const GroupParams* params, int ranges,
                                                            int bits, bool asymmetric, double* loss,
                                                            std::vector<double>& scratch) {
  check(ranges);
  constexpr int L = kClipLanes, V = L / 4;
  // Each lane's parameters (lanes past `ranges` repeat the last range, their loss unread).
  alignas(32) float scale[L], zero_point[L];
  alignas(32) double scale_d[L];
  for (int l = 0; l < L; ++l) {
    const GroupParams& p = params[std::min(l, ranges - 1)];
    scale[l] = p.scale;
    zero_point[l] = asymmetric ? static_cast<float>(p.zero_point) : 0.f;
    scale_d[l] = static_cast<double>(p.scale);
  }
  // quantize_value's clamp: [q_min, q_max] symmetric, [0, q_max] after + zero point.
  const __m128 q_lo = _mm_set1_ps(asymmetric ? 0.f : static_cast<float>(quantize_min(bits, false)));
  const __m128 q_hi = _mm_set1_ps(static_cast<float>(stored_max(bits, asymmetric)));
  scratch.resize(static_cast<std::size_t>(count) * L);
  double* w = scratch.data();
  for (std::int64_t i = 0; i < count; ++i) std::fill_n(w + i * L, L, double(values[i]));
  __m256d sum[V];
  for (__m256d& s : sum) s = _mm256_setzero_pd();
  for (std::int64_t i = 0; i < count; ++i) {
    const double* ui = u + i * ld;
    const __m256d u_ii = _mm256_set1_pd(ui[i]);
    __m256d e[V];
    for (int v = 0; v < V; ++v) {
      const __m256d wi = _mm256_loadu_pd(w + i * L + 4 * v);
      const __m128 s = _mm_load_ps(scale + 4 * v), z = _mm_load_ps(zero_point + 4 * v);
      __m128 q = round_half_away(_mm_div_ps(_mm256_cvtpd_ps(wi), s));
      if (asymmetric) q = _mm_add_ps(q, z);
      q = _mm_min_ps(_mm_max_ps(q, q_lo), q_hi);
      q = _mm_andnot_ps(_mm_cmp_ps(s, _mm_setzero_ps(), _CMP_EQ_OQ), q);  // scale 0: q = 0
      const __m128 level = asymmetric ? _mm_sub_ps(q, z) : q;             // exact integers
      const __m256d deq = _mm256_mul_pd(_mm256_load_pd(scale_d + 4 * v), _mm256_cvtps_pd(level));
      e[v] = _mm256_div_pd(_mm256_sub_pd(wi, deq), u_ii);
      sum[v] = _mm256_add_pd(sum[v], _mm256_mul_pd(e[v], e[v]));
    }
    for (std::int64_t j = i + 1; j < count; ++j) {
      const __m256d u_ij = _mm256_set1_pd(ui[j]);
      double* wj = w + j * L;
      for (int v = 0; v < V; ++v)
        _mm256_storeu_pd(wj + 4 * v,
                         _mm256_sub_pd(_mm256_loadu_pd(wj + 4 * v), _mm256_mul_pd(e[v], u_ij)));
    }
  }
  alignas(32) double lanes[L];
  for (int v = 0; v < V; ++v) _mm256_store_pd(lanes + 4 * v, sum[v]);
  std::copy_n(lanes, ranges, loss);
}

void gptq_group_losses(const float* values, std::int64_t count, const double* u, std::int64_t ld,
                       const GroupParams* params, int ranges, int bits, bool asymmetric,
                       double* loss, std::vector<double>& scratch) {
  if (cpu_info().isa.avx2)
    gptq_group_losses_avx2(values, count, u, ld, params, ranges, bits, asymmetric, loss, scratch);
  else
    gptq_group_losses_scalar(values, count, u, ld, params, ranges, bits, asymmetric, loss, scratch);
}

}  // namespace qforge
