// Split activations (ops/quant/split_activations.h) against their definition in float64:
// each digit row quantizes what the rows before it left, and the digits rebuild x to the
// stated bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "ops/quant/split_activations.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

// max |x - sum_d a_d q_d| / max |x| may reach this (split_activations.h, plus one f32
// rounding of each residual the digits after it quantize).
double bound_of(int digits) {
  return 1.0 / (2.0 * 127.0 * std::pow(254.0, digits - 1)) + std::ldexp(1.0, -23);
}

TEST(SplitActivations, DigitsQuantizeTheResidualsAndRebuildX) {
  for (int digits : {2, 3})
    for (std::int64_t g : {32, 36})  // group sums in the pass, or from the bytes after it
      for (std::int64_t k : {1, 7, 64, 300, 2048}) {
        const std::int64_t m = 3, kp = (k + g - 1) / g * g;
        auto x = test::random_floats(m * k, 40 + k + digits, 3.f);
        if (k > 1) x[k + 1] = 250.f;                              // row 1: one outlier channel
        for (std::int64_t i = 0; i < k; ++i) x[2 * k + i] = 0.f;  // row 2: zero
        QuantizedActivations q;
        prepare_split_activations(q, digits, m, k, kp, g);
        ASSERT_EQ(q.m, m * digits);
        split_activation_rows(x.data(), k, digits, 0, m, q);
        SCOPED_TRACE("g " + std::to_string(g));
        for (std::int64_t r = 0; r < m; ++r) {
          std::vector<double> residual(x.begin() + r * k, x.begin() + (r + 1) * k);
          double max_x = 0;
          for (double v : residual) max_x = std::max(max_x, std::fabs(v));
          for (int d = 0; d < digits; ++d) {
            const std::int64_t row = r * digits + d;
            double max_r = 0;
            for (double v : residual) max_r = std::max(max_r, std::fabs(v));
            // a_d is max |r_d| / 127 of the f32 residual, which differs from the float64 one
            // by a rounding of each earlier residual.
            EXPECT_NEAR(q.scale[row], max_r / 127.0, max_x * std::ldexp(1.0, -23) / 127.0 + 1e-30)
                << "row " << r << " digit " << d << " K " << k;
            std::vector<std::int32_t> sums(kp / g, 0);
            for (std::int64_t i = 0; i < kp; ++i) {
              const int v = q.row(row)[i];
              ASSERT_LE(std::abs(v), 127);
              if (i >= k) {
                ASSERT_EQ(v, 0) << "padding " << i;
                continue;
              }
              sums[i / g] += v;
              residual[i] -= double(q.scale[row]) * v;
            }
            for (std::int64_t j = 0; j < kp / g; ++j) EXPECT_EQ(q.sums(row)[j], sums[j]);
          }
          double max_error = 0;
          for (double v : residual) max_error = std::max(max_error, std::fabs(v));
          EXPECT_LE(max_error, bound_of(digits) * max_x) << "row " << r << " K " << k;
          if (r == 2) {
            EXPECT_EQ(max_error, 0.0);
          }
        }
      }
}

TEST(SplitActivations, EachRowSplitAloneGivesTheSameDigits) {
  const std::int64_t m = 4, k = 100, kp = 128, g = 64;
  const auto x = test::random_floats(m * k, 77, 1.f);
  QuantizedActivations whole, parts;
  prepare_split_activations(whole, 3, m, k, kp, g);
  prepare_split_activations(parts, 3, m, k, kp, g);
  split_activation_rows(x.data(), k, 3, 0, m, whole);
  for (std::int64_t r = m - 1; r >= 0; --r) split_activation_rows(x.data(), k, 3, r, 1, parts);
  for (std::int64_t row = 0; row < m * 3; ++row) {
    EXPECT_EQ(whole.scale[row], parts.scale[row]);
    for (std::int64_t i = 0; i < kp; ++i) EXPECT_EQ(whole.row(row)[i], parts.row(row)[i]);
  }
}

TEST(SplitActivations, BadInputIsAnError) {
  QuantizedActivations q;
  EXPECT_THROW(prepare_split_activations(q, 4, 1, 8, 8, 8), Error);
  prepare_split_activations(q, 2, 2, 8, 8, 8);
  std::vector<float> x(16, 1.f);
  EXPECT_THROW(split_activation_rows(x.data(), 8, 2, 1, 2, q), Error);  // rows past M
  x[9] = std::numeric_limits<float>::quiet_NaN();
  try {
    split_activation_rows(x.data(), 8, 2, 0, 2, q);
    ADD_FAILURE() << "a NaN was split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge
