#include "ops/quant/split_activations.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "ops/quant/round_avx2.h"

namespace qforge {
namespace {

void check_digits(int digits) {
  QF_REQUIRE(digits == 2 || digits == 3, "split activations: ", digits,
             " digit rows (expected 2 or 3)");
}

// The sum of a vector's 8 lanes.
__attribute__((target("avx2,fma"))) float lane_sum(__m256 v) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}

// One digit row in one pass: q = clamp(round_half_away(r / a)) (r times the reciprocal),
// its bytes and group sums; unless last, r - a q (one fma) into `next` and max |r - a q|
// returned. a > 0. Group sums here only when no 8-wide vector straddles two groups
// (group % 8 == 0); else the caller sums the bytes.
__attribute__((target("avx2,fma"))) float digit_pass_avx2(const float* r, std::int64_t k, float a,
                                                          std::int64_t group, std::int8_t* xq,
                                                          std::int32_t* sums, float* next) {
  const bool fused_sums = group % 8 == 0;
  const float inverse = 1.f / a;
  const __m256 mul = _mm256_set1_ps(inverse), scale = _mm256_set1_ps(a);
  const __m256 sign_bit = _mm256_set1_ps(-0.f);
  __m256 max_abs = _mm256_setzero_ps(), group_sum = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256 ri = _mm256_loadu_ps(r + i);
    const __m256 q = round_half_away_clamped_avx2(_mm256_mul_ps(ri, mul));
    if (next != nullptr) {
      const __m256 left = _mm256_fnmadd_ps(scale, q, ri);
      _mm256_storeu_ps(next + i, left);
      max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_bit, left));
    }
    const __m256i q32 = _mm256_cvtps_epi32(q);
    const __m128i w =
        _mm_packs_epi32(_mm256_castsi256_si128(q32), _mm256_extracti128_si256(q32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(xq + i), _mm_packs_epi16(w, w));
    if (fused_sums) {
      group_sum = _mm256_add_ps(group_sum, q);  // exact: |sum| <= 127 g < 2^24
      if ((i + 8) % group == 0) {
        sums[i / group] = static_cast<std::int32_t>(lane_sum(group_sum));
        group_sum = _mm256_setzero_ps();
      }
    }
  }
  float tail_sum = lane_sum(group_sum);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max_abs);
  float m = *std::max_element(lanes, lanes + 8);
  for (; i < k; ++i) {
    const float q = std::clamp(std::round(r[i] * inverse), -127.f, 127.f);
    xq[i] = static_cast<std::int8_t>(q);
    tail_sum += q;
    if (next != nullptr) {
      next[i] = std::fma(-a, q, r[i]);
      m = std::max(m, std::fabs(next[i]));
    }
  }
  // The last group, cut short by K (the padding holds zeros).
  if (fused_sums && k % group != 0) sums[k / group] = static_cast<std::int32_t>(tail_sum);
  return m;
}

// Digit rows first .. first + D - 1 of `out` from one row x, AVX2.
__attribute__((target("avx2,fma"))) void split_row_avx2(const float* x, std::int64_t r, int digits,
                                                        QuantizedActivations& out,
                                                        std::vector<float>& residual) {
  const std::int64_t k = out.k;
  float a = 0;  // this digit's scale: max |r_d| / 127
  try {
    a = checked_row_scale_avx2(x, k, r);
  } catch (const Error&) {
    fail("split activations: row ", r, " of x holds a value that is not finite");
  }
  const float* from = x;
  for (int d = 0; d < digits; ++d) {
    const std::int64_t row = r * digits + d;
    std::int8_t* xq = out.xq.data() + row * out.row_stride;
    std::int32_t* sums = out.group_sums.data() + row * out.groups();
    out.scale[row] = a;
    std::fill(sums, sums + out.groups(), 0);
    if (a == 0.f) {  // nothing left: this digit and the ones after it are zero
      std::memset(xq, 0, static_cast<std::size_t>(k));
      continue;
    }
    float* next = d + 1 < digits ? residual.data() : nullptr;
    a = digit_pass_avx2(from, k, a, out.group, xq, sums, next) / 127.f;
    from = residual.data();
    if (out.group % 8 != 0)
      for (std::int64_t i = 0; i < k; ++i) sums[i / out.group] += xq[i];
  }
}

}  // namespace

void prepare_split_activations(QuantizedActivations& out, int digits, std::int64_t m,
                               std::int64_t k, std::int64_t k_padded, std::int64_t group) {
  check_digits(digits);
  prepare_activations(out, m * digits, k, k_padded, group);
}

void split_activation_rows(const float* x, std::int64_t ldx, int digits, std::int64_t first,
                           std::int64_t count, QuantizedActivations& out) {
  check_digits(digits);
  QF_REQUIRE(first >= 0 && count >= 0 && (first + count) * digits <= out.m,
             "split activations: rows [", first, ", ", first + count, ") of ", digits,
             " digits outside the ", out.m, " digit rows prepared");
  thread_local std::vector<float> residual;
  residual.resize(static_cast<std::size_t>(out.k));
  if (cpu_info().isa.avx2 && cpu_info().isa.fma) {
    for (std::int64_t r = first; r < first + count; ++r)
      split_row_avx2(x + r * ldx, r, digits, out, residual);
    return;
  }
  for (std::int64_t r = first; r < first + count; ++r) {
    const float* row = x + r * ldx;
    for (std::int64_t d = 0; d < digits; ++d) {
      const std::int64_t digit_row = r * digits + d;
      // ldx 0: the digit row is read from the one buffer, whatever its index.
      try {
        quantize_activation_rows(d == 0 ? row : residual.data(), 0, 0.f, digit_row, 1, out);
      } catch (const Error&) {
        fail("split activations: row ", r, " of x holds a value that is not finite");
      }
      if (d + 1 == digits) break;
      if (d == 0) residual.assign(row, row + out.k);
      const float a = out.scale[digit_row];
      for (std::int64_t i = 0; i < out.k; ++i)  // r -= a q, one rounding (fma)
        residual[i] = std::fma(-a, static_cast<float>(out.row(digit_row)[i]), residual[i]);
    }
  }
}

}  // namespace qforge
