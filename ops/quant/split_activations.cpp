#include "ops/quant/split_activations.h"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"

namespace qforge {
namespace {

void check_digits(int digits) {
  QF_REQUIRE(digits == 2 || digits == 3, "split activations: ", digits,
             " digit rows (expected 2 or 3)");
}

// r -= a * float(q), one rounding per value (fma).
__attribute__((target("avx2,fma"))) void subtract_digit_avx2(float* r, const std::int8_t* q,
                                                             float a, std::int64_t k) {
  const __m256 scale = _mm256_set1_ps(a);
  std::int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    const __m256i q32 =
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
    const __m256 digit = _mm256_cvtepi32_ps(q32);
    _mm256_storeu_ps(r + i, _mm256_fnmadd_ps(scale, digit, _mm256_loadu_ps(r + i)));
  }
  for (; i < k; ++i) r[i] = std::fma(-a, static_cast<float>(q[i]), r[i]);
}

void subtract_digit(float* r, const std::int8_t* q, float a, std::int64_t k) {
  if (cpu_info().isa.avx2 && cpu_info().isa.fma) {
    subtract_digit_avx2(r, q, a, k);
    return;
  }
  for (std::int64_t i = 0; i < k; ++i) r[i] = std::fma(-a, static_cast<float>(q[i]), r[i]);
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
      subtract_digit(residual.data(), out.row(digit_row), out.scale[digit_row], out.k);
    }
  }
}

}  // namespace qforge
