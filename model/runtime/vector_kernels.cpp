#include "model/runtime/vector_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <span>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/cpu/cpu_info.h"
#include "model/format/ggml_quants.h"

namespace qforge {
namespace {

bool use_avx2() {
  static const bool avx2 = cpu_info().isa.avx2 && cpu_info().isa.fma && cpu_info().isa.f16c;
  return avx2;
}

// Eight cached values from element `index` of rows of type T, as floats (exact: int8 and
// bf16 widen without rounding).
template <KvType T>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256 load8(const void* base,
                                                                            std::int64_t index) {
  if constexpr (T == KvType::f32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + index);
  } else if constexpr (T == KvType::bf16) {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const std::uint16_t*>(base) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  } else {
    const __m128i b = _mm_loadl_epi64(
        reinterpret_cast<const __m128i*>(static_cast<const std::int8_t*>(base) + index));
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
  }
}

template <KvType T>
inline float element(const void* base, std::int64_t index) {
  if constexpr (T == KvType::f32) return static_cast<const float*>(base)[index];
  if constexpr (T == KvType::bf16)
    return bf16_to_f32(static_cast<const std::uint16_t*>(base)[index]);
  return static_cast<float>(static_cast<const std::int8_t*>(base)[index]);
}

__attribute__((target("avx2,fma,f16c"), always_inline)) inline float horizontal_sum(__m256 v) {
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

template <KvType T>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline float dot_avx2(const float* a,
                                                                              const void* b,
                                                                              int n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8<T>(b, i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8<T>(b, i + 8), s1);
  }
  if (i + 8 <= n) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8<T>(b, i), s0);
    i += 8;
  }
  float sum = horizontal_sum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += a[i] * element<T>(b, i);
  return sum;
}

// Four positions at a time: one accumulator per row, the four reduced together
//   a0..a3 (8 lanes each) -> hadd -> hadd -> low + high half = [s0 s1 s2 s3]
// so the horizontal sum costs a quarter of what it would per row. int8 rows: each sum
// times its row's scale, then the divisor.
template <KvType T>
__attribute__((target("avx2,fma,f16c"))) void dot_rows_avx2(const float* q, const KvRows& k,
                                                            int count, int n, float divisor,
                                                            float* scores) {
  const int vector_end = n / 8 * 8;
  const __m128 divisor4 = _mm_set1_ps(divisor);
  const std::int64_t stride = k.stride;
  int p = 0;
  for (; p + 4 <= count; p += 4) {
    const std::int64_t r0 = p * stride, r1 = r0 + stride, r2 = r1 + stride, r3 = r2 + stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < vector_end; i += 8) {
      const __m256 qv = _mm256_loadu_ps(q + i);
      a0 = _mm256_fmadd_ps(qv, load8<T>(k.data, r0 + i), a0);
      a1 = _mm256_fmadd_ps(qv, load8<T>(k.data, r1 + i), a1);
      a2 = _mm256_fmadd_ps(qv, load8<T>(k.data, r2 + i), a2);
      a3 = _mm256_fmadd_ps(qv, load8<T>(k.data, r3 + i), a3);
    }
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    __m128 sums = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    if (vector_end < n) {
      alignas(16) float tail[4];
      _mm_store_ps(tail, sums);
      for (int i = vector_end; i < n; ++i) {
        tail[0] += q[i] * element<T>(k.data, r0 + i);
        tail[1] += q[i] * element<T>(k.data, r1 + i);
        tail[2] += q[i] * element<T>(k.data, r2 + i);
        tail[3] += q[i] * element<T>(k.data, r3 + i);
      }
      sums = _mm_load_ps(tail);
    }
    if constexpr (T == KvType::int8)
      sums = _mm_mul_ps(
          sums, _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.scales + p))));
    _mm_storeu_ps(scores + p, _mm_div_ps(sums, divisor4));
  }
  for (; p < count; ++p) {
    float sum = dot_avx2<T>(q, static_cast<const char*>(k.from(p).data), n);
    if constexpr (T == KvType::int8) sum *= f16_to_f32(k.scales[p]);
    scores[p] = sum / divisor;
  }
}

// y[i0 .. i0 + 8 * V) in V registers, positions added in order (int8 rows: each
// position's weight times its row's scale).
template <int V, KvType T>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void weighted_block(
    const float* w, const KvRows& v, std::int64_t column, int count, bool accumulate, float* y) {
  // Fully unrolled, so acc[] lives in registers (a rolled j loop keeps it on the stack
  // and puts a store-to-load round trip in every fma's dependency chain).
  __m256 acc[V];
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j)
    acc[j] = accumulate ? _mm256_loadu_ps(y + 8 * j) : _mm256_setzero_ps();
  for (int p = 0; p < count; ++p) {
    const float wp = T == KvType::int8 ? w[p] * f16_to_f32(v.scales[p]) : w[p];
    const __m256 weight = _mm256_set1_ps(wp);
    const std::int64_t row = p * v.stride + column;
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j)
      acc[j] = _mm256_fmadd_ps(weight, load8<T>(v.data, row + 8 * j), acc[j]);
  }
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j) _mm256_storeu_ps(y + 8 * j, acc[j]);
}

template <KvType T>
__attribute__((target("avx2,fma,f16c"))) void weighted_rows_avx2(const float* w, const KvRows& v,
                                                                 int count, int n, bool accumulate,
                                                                 float* y) {
  int i = 0;
  for (; i + 64 <= n; i += 64) weighted_block<8, T>(w, v, i, count, accumulate, y + i);
  for (; i + 8 <= n; i += 8) weighted_block<1, T>(w, v, i, count, accumulate, y + i);
  for (; i < n; ++i) {
    float sum = accumulate ? y[i] : 0.f;
    for (int p = 0; p < count; ++p) {
      const float wp = T == KvType::int8 ? w[p] * f16_to_f32(v.scales[p]) : w[p];
      sum = std::fma(wp, element<T>(v.data, p * v.stride + i), sum);
    }
    y[i] = sum;
  }
}

// exp(x) for x <= 0, 8 lanes: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its Taylor
// polynomial to r^7 (truncation below 6e-9 relative), 2^n put straight into the exponent.
// x below -87.3 is taken as -87.3 (exp = 1.2e-38, the smallest normal); NaN stays NaN.
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.3f), x);  // second operand returned for NaN
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 in two parts, the first exact in 16 bits, so n * ln2_high has no rounding error
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 poly = _mm256_set1_ps(1.f / 5040);
  for (const float c : {1.f / 720, 1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f})
    poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(c));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(poly, _mm256_castsi256_ps(exponent));
}

__attribute__((target("avx2,fma,f16c"))) float horizontal_max(__m256 v) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

__attribute__((target("avx2,fma,f16c"))) void softmax_avx2(float* x, int count) {
  const int vector_end = count / 8 * 8;
  __m256 max8 = _mm256_set1_ps(-INFINITY);
  for (int p = 0; p < vector_end; p += 8) max8 = _mm256_max_ps(max8, _mm256_loadu_ps(x + p));
  float max_value = horizontal_max(max8);
  for (int p = vector_end; p < count; ++p) max_value = std::max(max_value, x[p]);
  const __m256 shift = _mm256_set1_ps(max_value);
  __m256 sum8 = _mm256_setzero_ps();
  for (int p = 0; p < vector_end; p += 8) {
    const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(x + p), shift));
    _mm256_storeu_ps(x + p, e);
    sum8 = _mm256_add_ps(sum8, e);
  }
  float sum = horizontal_sum(sum8);
  for (int p = vector_end; p < count; ++p) {
    x[p] = std::exp(x[p] - max_value);
    sum += x[p];
  }
  const __m256 inverse = _mm256_set1_ps(1.f / sum);
  for (int p = 0; p < vector_end; p += 8)
    _mm256_storeu_ps(x + p, _mm256_mul_ps(_mm256_loadu_ps(x + p), inverse));
  for (int p = vector_end; p < count; ++p) x[p] *= 1.f / sum;
}

// sum_c a[c] * k[c] of int8 vectors (|a|, |k| <= 127), exact: |a| as u8 times k with a's
// sign as s8 (vpmaddubsw: pairs <= 2 * 127 * 127, no saturation), pairs to int32 (vpmaddwd).
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256i int8_products(__m256i abs_a,
                                                                                     __m256i a,
                                                                                     __m256i k) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_a, _mm256_sign_epi8(k, a)),
                           _mm256_set1_epi16(1));
}

__attribute__((target("avx2,fma,f16c"), always_inline)) inline std::int32_t horizontal_sum(
    __m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1)));
}

// Rows [0, count) of int8 `rows` (n a multiple of 32) against int8 `a`, int32 sums; four
// rows at a time, their sums reduced together (hadd, hadd, low + high half).
__attribute__((target("avx2,fma,f16c"))) void int8_dots_avx2(const std::int8_t* a,
                                                             const std::int8_t* rows,
                                                             std::int64_t stride, int count, int n,
                                                             std::int32_t* dots) {
  int p = 0;
  for (; p + 4 <= count; p += 4) {
    const std::int8_t* row = rows + p * stride;
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    for (int i = 0; i < n; i += 32) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
      const __m256i abs_a = _mm256_abs_epi8(av);
      const std::int8_t* k = row + i;  // rows stride bytes apart
      const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k));
      const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + stride));
      const __m256i k2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 2 * stride));
      const __m256i k3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 3 * stride));
      s0 = _mm256_add_epi32(s0, int8_products(abs_a, av, k0));
      s1 = _mm256_add_epi32(s1, int8_products(abs_a, av, k1));
      s2 = _mm256_add_epi32(s2, int8_products(abs_a, av, k2));
      s3 = _mm256_add_epi32(s3, int8_products(abs_a, av, k3));
    }
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dots + p),
                     _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
  }
  for (; p < count; ++p) {
    const std::int8_t* row = rows + p * stride;
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < n; i += 32) {
      const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
      const __m256i kv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + i));
      acc = _mm256_add_epi32(acc, int8_products(_mm256_abs_epi8(av), av, kv));
    }
    dots[p] = horizontal_sum(acc);
  }
}

void int8_dots(const std::int8_t* a, const std::int8_t* rows, std::int64_t stride, int count, int n,
               std::int32_t* dots) {
  if (use_avx2() && n % 32 == 0) return int8_dots_avx2(a, rows, stride, count, n, dots);
  for (int p = 0; p < count; ++p) {
    std::int32_t sum = 0;
    for (int i = 0; i < n; ++i) sum += std::int32_t(a[i]) * rows[p * stride + i];
    dots[p] = sum;
  }
}

// 8 values of q * s / t, rounded to the nearest integer (even on ties: MXCSR's default).
__attribute__((target("avx2,fma,f16c"), always_inline)) inline __m256i rounded8(const float* q,
                                                                                const float* s,
                                                                                __m256 t, int c) {
  const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(s + c));
  return _mm256_cvtps_epi32(_mm256_div_ps(y, t));
}

// y = q * s, t = max|y| / 127, a = nearest-even(y / t): 8 lanes (n a multiple of 8); the
// same IEEE operations as the scalar form, so the same bytes.
__attribute__((target("avx2,fma,f16c"))) float quantize_query_avx2(const float* q, const float* s,
                                                                   int n, std::int8_t* a) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 absmax8 = _mm256_setzero_ps();
  for (int c = 0; c < n; c += 8)
    absmax8 = _mm256_max_ps(absmax8, _mm256_andnot_ps(sign, _mm256_mul_ps(_mm256_loadu_ps(q + c),
                                                                          _mm256_loadu_ps(s + c))));
  const float t = horizontal_max(absmax8) / 127.f;
  if (!(t > 0.f)) {
    std::fill(a, a + n, std::int8_t{0});
    return t;
  }
  const __m256 t8 = _mm256_set1_ps(t);
  int c = 0;
  // 32 at a time: packs to s16 then s8 (saturating, so also the clamp) interleave the
  // 128-bit lanes as [0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31]; the dword permute
  // puts them back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (; c + 32 <= n; c += 32) {
    const __m256i lo = _mm256_packs_epi32(rounded8(q, s, t8, c), rounded8(q, s, t8, c + 8));
    const __m256i hi = _mm256_packs_epi32(rounded8(q, s, t8, c + 16), rounded8(q, s, t8, c + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(lo, hi), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + c),
                        _mm256_max_epi8(bytes, _mm256_set1_epi8(-127)));
  }
  alignas(32) std::int32_t tail[8];
  for (; c < n; c += 8) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(tail), rounded8(q, s, t8, c));
    for (int j = 0; j < 8; ++j) a[c + j] = static_cast<std::int8_t>(std::clamp(tail[j], -127, 127));
  }
  return t;
}

}  // namespace

QuantizedQuery quantize_query(const float* q, const float* channel_scales, int n, std::int8_t* a) {
  if (use_avx2() && n % 8 == 0) return {quantize_query_avx2(q, channel_scales, n, a)};
  float absmax = 0.f;
  for (int c = 0; c < n; ++c) absmax = std::max(absmax, std::abs(q[c] * channel_scales[c]));
  const float t = absmax / 127.f;
  for (int c = 0; c < n; ++c)
    a[c] = static_cast<std::int8_t>(
        t > 0.f ? std::clamp(std::nearbyint(q[c] * channel_scales[c] / t), -127.f, 127.f) : 0.f);
  return {t};
}

void dot_rows_int8_keys(const float* q, const KvRows& k, int count, int n, float divisor,
                        float* scores) {
  constexpr int kMaxDim = 1024;
  QF_REQUIRE(k.type == KvType::int8 && k.channel_scales != nullptr && n <= kMaxDim,
             "dot_rows_int8_keys: int8 keys with channel scales, head_dim <= ", kMaxDim);
  alignas(32) std::int8_t a[kMaxDim];
  float scales[kMaxDim];
  std::int32_t dots[64];
  const auto* data = static_cast<const std::int8_t*>(k.data);
  int p = 0;
  while (p < count) {
    const std::int64_t position = k.position + p;
    if (position >= k.exact_from) {  // the query's own group: exact f32 rows
      const KvRows exact{KvType::f32, k.exact + (position - k.exact_from) * k.stride, nullptr,
                         k.stride};
      return dot_rows(q, exact, count - p, n, divisor, scores + p);
    }
    // The rest of this group (and of the rounded rows), 64 rows at a time at most.
    const std::int64_t group_end = (position / k.group + 1) * k.group;
    const int rows = static_cast<int>(
        std::min<std::int64_t>({group_end - position, k.exact_from - position, count - p, 64}));
    dequantize_row(
        GgmlType::F16,
        std::as_bytes(std::span(k.channel_scales + position / k.group * k.stride, std::size_t(n))),
        std::span(scales, std::size_t(n)));
    const QuantizedQuery query = quantize_query(q, scales, n, a);
    int8_dots(a, data + p * k.stride, k.stride, rows, n, dots);
    for (int r = 0; r < rows; ++r) scores[p + r] = query.scale * float(dots[r]) / divisor;
    p += rows;
  }
}

void dot_rows(const float* q, const KvRows& k, int count, int n, float divisor, float* scores) {
  if (use_avx2() && k.plain()) {
    switch (k.type) {
      case KvType::f32:
        return dot_rows_avx2<KvType::f32>(q, k, count, n, divisor, scores);
      case KvType::bf16:
        return dot_rows_avx2<KvType::bf16>(q, k, count, n, divisor, scores);
      case KvType::int8:
        return dot_rows_avx2<KvType::int8>(q, k, count, n, divisor, scores);
    }
  }
  dot_rows_reference(q, k, count, n, divisor, scores);
}

void weighted_rows(const float* w, const KvRows& v, int count, int n, bool accumulate, float* y) {
  if (use_avx2() && v.plain()) {
    switch (v.type) {
      case KvType::f32:
        return weighted_rows_avx2<KvType::f32>(w, v, count, n, accumulate, y);
      case KvType::bf16:
        return weighted_rows_avx2<KvType::bf16>(w, v, count, n, accumulate, y);
      case KvType::int8:
        return weighted_rows_avx2<KvType::int8>(w, v, count, n, accumulate, y);
    }
  }
  weighted_rows_reference(w, v, count, n, accumulate, y);
}

namespace {

// Row p of `rows` as f32 when it is one of the exact rows, else nullptr.
inline const float* exact_row(const KvRows& rows, int p) {
  const std::int64_t position = rows.position + p;
  return position >= rows.exact_from ? rows.exact + (position - rows.exact_from) * rows.stride
                                     : nullptr;
}

// The scales of row p's channels (int8 keys), or nullptr.
inline const std::uint16_t* channel_scales_of(const KvRows& rows, int p) {
  if (rows.channel_scales == nullptr) return nullptr;
  return rows.channel_scales + (rows.position + p) / rows.group * rows.stride;
}

template <KvType T>
__attribute__((target("avx2,fma,f16c"))) void decode_rows_avx2(const KvRows& rows, int count, int n,
                                                               float* out) {
  const int vector_end = n / 8 * 8;
  for (int p = 0; p < count; ++p) {
    const std::int64_t row = p * rows.stride;
    float* y = out + std::size_t(p) * n;
    if (const float* exact = exact_row(rows, p)) {
      std::copy(exact, exact + n, y);
      continue;
    }
    if constexpr (T == KvType::int8) {
      if (const std::uint16_t* channel = channel_scales_of(rows, p)) {
        for (int i = 0; i < vector_end; i += 8) {
          const __m256 scale =
              _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(channel + i)));
          _mm256_storeu_ps(y + i, _mm256_mul_ps(scale, load8<T>(rows.data, row + i)));
        }
      } else {
        const __m256 scale = _mm256_set1_ps(f16_to_f32(rows.scales[p]));
        for (int i = 0; i < vector_end; i += 8)
          _mm256_storeu_ps(y + i, _mm256_mul_ps(scale, load8<T>(rows.data, row + i)));
      }
    } else {
      for (int i = 0; i < vector_end; i += 8) _mm256_storeu_ps(y + i, load8<T>(rows.data, row + i));
    }
    for (int i = vector_end; i < n; ++i) y[i] = kv_value(rows, p, i);
  }
}

}  // namespace

void decode_rows(const KvRows& rows, int count, int n, float* out) {
  if (use_avx2() && rows.type == KvType::int8)
    return decode_rows_avx2<KvType::int8>(rows, count, n, out);
  if (use_avx2() && rows.type == KvType::bf16)
    return decode_rows_avx2<KvType::bf16>(rows, count, n, out);
  for (int p = 0; p < count; ++p)
    for (int i = 0; i < n; ++i) out[std::size_t(p) * n + i] = kv_value(rows, p, i);
}

float kv_value(const KvRows& rows, int p, int i) {
  if (const float* exact = exact_row(rows, p)) return exact[i];
  const std::int64_t index = p * rows.stride + i;
  switch (rows.type) {
    case KvType::bf16:
      return element<KvType::bf16>(rows.data, index);
    case KvType::int8:
      if (const std::uint16_t* channel = channel_scales_of(rows, p))
        return f16_to_f32(channel[i]) * element<KvType::int8>(rows.data, index);
      return f16_to_f32(rows.scales[p]) * element<KvType::int8>(rows.data, index);
    case KvType::f32:
      break;
  }
  return element<KvType::f32>(rows.data, index);
}

void dot_rows_reference(const float* q, const KvRows& k, int count, int n, float divisor,
                        float* scores) {
  for (int p = 0; p < count; ++p) {
    float sum = 0.f;
    for (int i = 0; i < n; ++i) sum += q[i] * kv_value(k, p, i);
    scores[p] = sum / divisor;
  }
}

void weighted_rows_reference(const float* w, const KvRows& v, int count, int n, bool accumulate,
                             float* y) {
  for (int i = 0; i < n; ++i) {
    float sum = accumulate ? y[i] : 0.f;
    for (int p = 0; p < count; ++p) sum += w[p] * kv_value(v, p, i);
    y[i] = sum;
  }
}

void dot_rows(const float* q, const float* k, std::int64_t stride, int count, int n, float divisor,
              float* scores) {
  dot_rows(q, KvRows{KvType::f32, k, nullptr, stride}, count, n, divisor, scores);
}

void weighted_rows(const float* w, const float* v, std::int64_t stride, int count, int n,
                   bool accumulate, float* y) {
  weighted_rows(w, KvRows{KvType::f32, v, nullptr, stride}, count, n, accumulate, y);
}

void softmax(float* x, int count) {
  if (use_avx2()) return softmax_avx2(x, count);
  float max_value = x[0];
  for (int p = 1; p < count; ++p) max_value = std::max(max_value, x[p]);
  float sum = 0.f;
  for (int p = 0; p < count; ++p) {
    x[p] = std::exp(x[p] - max_value);
    sum += x[p];
  }
  for (int p = 0; p < count; ++p) x[p] /= sum;
}

}  // namespace qforge
