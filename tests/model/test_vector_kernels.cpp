// The attention's vector loops against float64 sums, for every length tail and rows
// strided as the KV cache holds them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "jit/base/error.h"
#include "model/runtime/kv_cache.h"
#include "model/runtime/vector_kernels.h"

namespace qforge {
namespace {

TEST(VectorKernels, DotRowsAndWeightedRowsMatchFloat64) {
  std::mt19937 rng(41);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int n = 0; n <= 200; n += (n < 80 ? 1 : 13))
    for (int count : {1, 2, 3, 4, 7, 8, 33}) {
      const int stride = n + 5;  // rows further apart than n: columns n.. must not be read in
      std::vector<float> q(n), rows(std::size_t(count) * stride), w(count);
      for (float& x : q) x = normal(rng);
      for (float& x : rows) x = normal(rng);
      for (float& x : w) x = normal(rng);
      const float divisor = 8.f;
      std::vector<float> scores(count + 1, -1.f);
      dot_rows(q.data(), rows.data(), stride, count, n, divisor, scores.data());
      for (int p = 0; p < count; ++p) {
        double want = 0, magnitude = 0;
        for (int i = 0; i < n; ++i) {
          want += double(q[i]) * rows[std::size_t(p) * stride + i];
          magnitude += std::fabs(double(q[i]) * rows[std::size_t(p) * stride + i]);
        }
        ASSERT_NEAR(scores[p], want / divisor, 1e-6 * (magnitude + 1)) << n << " row " << p;
      }
      EXPECT_EQ(scores[count], -1.f) << "wrote past count";

      std::vector<float> y(n + 1, -1.f);
      weighted_rows(w.data(), rows.data(), stride, count, n, false, y.data());
      for (int i = 0; i < n; ++i) {
        double want = 0, magnitude = 0;
        for (int p = 0; p < count; ++p) {
          want += double(w[p]) * rows[std::size_t(p) * stride + i];
          magnitude += std::fabs(double(w[p]) * rows[std::size_t(p) * stride + i]);
        }
        ASSERT_NEAR(y[i], want, 1e-6 * (magnitude + 1)) << n << " column " << i;
      }
      EXPECT_EQ(y[n], -1.f) << "wrote past n";
    }
}

// Attention cuts a head's positions into blocks starting at multiples of 4: dot_rows over
// each block, and weighted_rows accumulating block after block, give exactly the floats of
// one call over all positions.
TEST(VectorKernels, BlocksOfPositionsGiveTheSameFloatsAsOneCall) {
  std::mt19937 rng(47);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int n : {5, 8, 64, 72, 100})
    for (int count : {1, 3, 4, 9, 33, 70})
      for (int block : {4, 8, 32}) {
        const int stride = n + 3;
        std::vector<float> q(n), rows(std::size_t(count) * stride), w(count);
        for (float& x : q) x = normal(rng);
        for (float& x : rows) x = normal(rng);
        for (float& x : w) x = normal(rng);
        std::vector<float> whole(count), blocked(count), y_whole(n), y_blocked(n, 123.f);
        dot_rows(q.data(), rows.data(), stride, count, n, 8.f, whole.data());
        weighted_rows(w.data(), rows.data(), stride, count, n, false, y_whole.data());
        for (int p0 = 0; p0 < count; p0 += block) {
          const int m = std::min(block, count - p0);
          const float* at = rows.data() + std::size_t(p0) * stride;
          dot_rows(q.data(), at, stride, m, n, 8.f, blocked.data() + p0);
          weighted_rows(w.data() + p0, at, stride, m, n, p0 > 0, y_blocked.data());
        }
        for (int p = 0; p < count; ++p)
          ASSERT_EQ(whole[p], blocked[p]) << "n " << n << " count " << count << " p " << p;
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(y_whole[i], y_blocked[i]) << "n " << n << " count " << count << " i " << i;
      }
}

// Scores as attention makes them (spread over tens of units, so some exps underflow to
// the smallest normals) against exp in double; every length up to 70 covers each tail.
TEST(VectorKernels, SoftmaxMatchesFloat64) {
  std::mt19937 rng(43);
  for (float spread : {0.1f, 3.f, 40.f})
    for (int count = 1; count <= 70; ++count) {
      std::normal_distribution<float> normal(2.f, spread);
      std::vector<float> x(count + 1, -1.f);
      for (int p = 0; p < count; ++p) x[p] = normal(rng);
      double max_value = x[0];
      for (int p = 0; p < count; ++p) max_value = std::max(max_value, double(x[p]));
      const std::vector<float> x_in = x;
      std::vector<double> want(count);
      double sum = 0;
      for (int p = 0; p < count; ++p) sum += want[p] = std::exp(double(x[p]) - max_value);
      softmax(x.data(), count);
      double total = 0;
      for (int p = 0; p < count; ++p) {
        const double expected = want[p] / sum;
        // x - max rounded to float is off by up to |x - max| / 2^24, which exp turns into
        // that relative error; a few more float roundings for the exp, the sum and the
        // scaling; plus the smallest normal for the lanes exp takes to 1.2e-38, not 0
        const double shifted = std::fabs(double(x_in[p]) - max_value);
        ASSERT_NEAR(x[p], expected, 6e-8 * (shifted + 8) * expected + 2e-38)
            << "count " << count << " spread " << spread << " position " << p;
        total += x[p];
      }
      EXPECT_NEAR(total, 1.0, 1e-5) << count;
      EXPECT_EQ(x[count], -1.f) << "wrote past count";
    }
}

// The cache's bf16 and int8 rows: stored values decode to what the type's definition
// gives (int8: s * round(x / s), s = max|row| / 127; bf16: nearest even), and dot_rows /
// weighted_rows on them match float64 sums of those decoded values, every length tail.
TEST(VectorKernels, QuantizedCacheRowsMatchFloat64OfTheirDecodedValues) {
  std::mt19937 rng(53);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const KvType type : {KvType::int8, KvType::bf16})
    for (int n = 1; n <= 160; n += (n < 40 ? 1 : 11))
      for (int count : {1, 3, 4, 9, 33}) {
        KvCache cache(1, count, 1, n, type);
        std::vector<float> rows(std::size_t(count) * n), q(n), w(count);
        for (float& x : rows) x = normal(rng);
        for (float& x : q) x = normal(rng);
        for (float& x : w) x = normal(rng);
        for (int p = 0; p < count; ++p)
          cache.store(0, p, rows.data() + std::size_t(p) * n, rows.data() + std::size_t(p) * n);
        std::vector<double> decoded(rows.size());
        for (int p = 0; p < count; ++p) {
          const float* row = rows.data() + std::size_t(p) * n;
          float absmax = 0;
          for (int i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(row[i]));
          const float s = absmax / 127.f;
          for (int i = 0; i < n; ++i) {
            double want;
            if (type == KvType::int8) {
              want = double(s) * std::round(row[i] / s);
            } else {
              std::uint32_t bits = std::bit_cast<std::uint32_t>(row[i]);
              bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
              want = std::bit_cast<float>(bits);
            }
            decoded[std::size_t(p) * n + i] = want;
            ASSERT_NEAR(kv_value(cache.keys(0, 0), p, i), want, 1e-7 * std::fabs(want))
                << n << " row " << p;
          }
        }
        std::vector<float> block(std::size_t(count) * n);
        decode_rows(cache.keys(0, 0), count, n, block.data());
        for (int p = 0; p < count; ++p)
          for (int i = 0; i < n; ++i)
            ASSERT_EQ(block[std::size_t(p) * n + i], kv_value(cache.keys(0, 0), p, i)) << n;
        std::vector<float> scores(count + 1, -1.f), y(n + 1, -1.f);
        dot_rows(q.data(), cache.keys(0, 0), count, n, 8.f, scores.data());
        weighted_rows(w.data(), cache.values(0, 0), count, n, false, y.data());
        for (int p = 0; p < count; ++p) {
          double want = 0, magnitude = 0;
          for (int i = 0; i < n; ++i) {
            want += q[i] * decoded[std::size_t(p) * n + i];
            magnitude += std::fabs(q[i] * decoded[std::size_t(p) * n + i]);
          }
          ASSERT_NEAR(scores[p], want / 8, 1e-6 * (magnitude + 1)) << n << " row " << p;
        }
        EXPECT_EQ(scores[count], -1.f);
        for (int i = 0; i < n; ++i) {
          double want = 0, magnitude = 0;
          for (int p = 0; p < count; ++p) {
            want += w[p] * decoded[std::size_t(p) * n + i];
            magnitude += std::fabs(w[p] * decoded[std::size_t(p) * n + i]);
          }
          ASSERT_NEAR(y[i], want, 1e-6 * (magnitude + 1)) << n << " column " << i;
        }
        EXPECT_EQ(y[n], -1.f);
        // The scalar definitions agree too.
        std::vector<float> ref_scores(count), ref_y(n);
        dot_rows_reference(q.data(), cache.keys(0, 0), count, n, 8.f, ref_scores.data());
        weighted_rows_reference(w.data(), cache.values(0, 0), count, n, false, ref_y.data());
        for (int p = 0; p < count; ++p)
          ASSERT_NEAR(ref_scores[p], scores[p], 1e-5 * (1 + std::fabs(scores[p])));
        for (int i = 0; i < n; ++i) ASSERT_NEAR(ref_y[i], y[i], 1e-5 * (1 + std::fabs(y[i])));
      }
}

TEST(KvCache, BytesPerTypeAndBlocksOfQuantizedRowsGiveTheSameFloats) {
  const KvCache f32(2, 10, 3, 64), bf16(2, 10, 3, 64, KvType::bf16),
      int8(2, 10, 3, 64, KvType::int8);
  EXPECT_EQ(f32.bytes(), 2u * 2 * 10 * 3 * 64 * 4);
  EXPECT_EQ(bf16.bytes() * 2, f32.bytes());
  EXPECT_EQ(int8.bytes(), 2u * 2 * 10 * 3 * (64 + 4));  // a quarter, plus a scale per row
  EXPECT_THROW(parse_kv_type("int4"), Error);
  std::mt19937 rng(59);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const KvType type : {KvType::int8, KvType::bf16}) {
    const int n = 72, count = 70;
    KvCache cache(1, count, 1, n, type);
    std::vector<float> row(n), q(n), w(count);
    for (int p = 0; p < count; ++p) {
      for (float& x : row) x = normal(rng);
      cache.store(0, p, row.data(), row.data());
    }
    for (float& x : q) x = normal(rng);
    for (float& x : w) x = normal(rng);
    std::vector<float> whole(count), blocked(count), y_whole(n), y_blocked(n);
    dot_rows(q.data(), cache.keys(0, 0), count, n, 8.f, whole.data());
    weighted_rows(w.data(), cache.values(0, 0), count, n, false, y_whole.data());
    for (int p0 = 0; p0 < count; p0 += 32) {
      const int m = std::min(32, count - p0);
      dot_rows(q.data(), cache.keys(0, 0).from(p0), m, n, 8.f, blocked.data() + p0);
      weighted_rows(w.data() + p0, cache.values(0, 0).from(p0), m, n, p0 > 0, y_blocked.data());
    }
    EXPECT_EQ(whole, blocked);
    EXPECT_EQ(y_whole, y_blocked);
  }
}

}  // namespace
}  // namespace qforge
