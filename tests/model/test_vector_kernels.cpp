// The attention's vector loops against float64 sums, for every length tail.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/vector_kernels.h"

namespace qforge {
namespace {

TEST(VectorKernels, DotAndAddScaledMatchFloat64) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int n = 0; n <= 200; ++n) {
    std::vector<float> a(n), b(n), y(n);
    for (int i = 0; i < n; ++i) a[i] = normal(rng), b[i] = normal(rng), y[i] = normal(rng);
    double want = 0, magnitude = 0;
    for (int i = 0; i < n; ++i) {
      want += double(a[i]) * b[i];
      magnitude += std::fabs(double(a[i]) * b[i]);
    }
    EXPECT_NEAR(dot(a.data(), b.data(), n), want, 1e-6 * (magnitude + 1)) << n;

    const float s = normal(rng);
    std::vector<float> got = y;
    add_scaled(got.data(), s, a.data(), n);
    for (int i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], double(y[i]) + double(s) * a[i], 1e-6 * (std::fabs(y[i]) + 1))
          << n << ", " << i;
  }
}

}  // namespace
}  // namespace qforge
