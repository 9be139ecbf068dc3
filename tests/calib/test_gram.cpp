// GramAccumulator: the sum of x^T x over every row added, against a float64 sum written
// here, for widths that leave a partial column block and row counts that cross the
// batch boundary; the result is exactly symmetric, and reading it midway does not
// disturb what is added after.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "calib/gram.h"

namespace qforge {
namespace {

std::vector<double> float64_gram(const std::vector<float>& x, int rows, int k) {
  std::vector<double> g(std::size_t(k) * k, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        g[std::size_t(a) * k + b] +=
            double(x[std::size_t(r) * k + a]) * double(x[std::size_t(r) * k + b]);
  return g;
}

void expect_gram(std::span<const double> got, const std::vector<double>& want, int k, int rows) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b) {
      const std::size_t i = std::size_t(a) * k + b;
      ASSERT_EQ(got[i], got[std::size_t(b) * k + a]) << "(" << a << ", " << b << ")";
      worst = std::max(worst, std::abs(got[i] - want[i]));
    }
  // Each batch of up to kBatchRows terms sums in f32: entries are O(rows) (values in
  // [-1, 1] with mean square 1/3), so the error is a few f32 ulps of that.
  EXPECT_LT(worst, 1e-5 * rows) << "k " << k;
}

TEST(GramAccumulator, MatchesAFloat64SumAcrossBlocksAndBatches) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  for (int k : {5, GramAccumulator::kBlock, GramAccumulator::kBlock + 1, 600}) {
    const int rows = GramAccumulator::kBatchRows + 700;
    std::vector<float> x(std::size_t(rows) * k);
    for (float& v : x) v = value(rng);
    GramAccumulator gram(k);
    int added = 0;
    for (int chunk : {300, 1, 1900, 547}) {  // 300 + 1 + 1900 crosses the batch boundary
      gram.add(x.data() + std::size_t(added) * k, chunk);
      added += chunk;
      if (added == 301) expect_gram(gram.sum(), float64_gram(x, added, k), k, added);
    }
    ASSERT_EQ(added, rows);
    expect_gram(gram.sum(), float64_gram(x, rows, k), k, rows);
  }
}

}  // namespace
}  // namespace qforge
