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

// What the cache's rows should decode to, in double, for a query at the last of `count`
// stored positions: bf16 rounds each value to nearest even; int8 (KIVI) rounds keys with
// one scale per channel over each 32-position group and values with one scale per row,
// except in the query's own group, read exactly (s = f16(max|.| / 127), x -> s round(x / s);
// the compiler's _Float16 conversion is the f16 rounding).
std::vector<double> expected_rows(KvType type, bool keys, const std::vector<float>& rows, int count,
                                  int n) {
  std::vector<double> out(rows.size());
  const int own_group = (count - 1) / KvCache::kGroup * KvCache::kGroup;
  auto at = [&](int p, int i) { return rows[std::size_t(p) * n + i]; };
  for (int p = 0; p < count; ++p)
    for (int i = 0; i < n; ++i) {
      double& want = out[std::size_t(p) * n + i];
      if (type == KvType::bf16) {
        std::uint32_t bits = std::bit_cast<std::uint32_t>(at(p, i));
        bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
        want = std::bit_cast<float>(bits);
        continue;
      }
      if (p >= own_group) {
        want = at(p, i);
        continue;
      }
      float absmax = 0;
      if (keys) {
        const int first = p / KvCache::kGroup * KvCache::kGroup;
        for (int r = first; r < first + KvCache::kGroup; ++r)
          absmax = std::max(absmax, std::fabs(at(r, i)));
      } else {
        for (int c = 0; c < n; ++c) absmax = std::max(absmax, std::fabs(at(p, c)));
      }
      const float s = static_cast<float>(static_cast<_Float16>(absmax / 127.f));
      want = s > 0 ? double(s) * std::round(at(p, i) / s) : 0.0;
    }
  return out;
}

// dot_rows / weighted_rows on `k` / `v` against float64 sums of their decoded values, and
// the scalar definitions agree.
void expect_sums_of_decoded(const KvRows& k, const std::vector<double>& keys, const KvRows& v,
                            const std::vector<double>& values, int count, int n,
                            std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(n), w(count);
  for (float& x : q) x = normal(rng);
  for (float& x : w) x = normal(rng);
  std::vector<float> scores(count + 1, -1.f), y(n + 1, -1.f);
  dot_rows(q.data(), k, count, n, 8.f, scores.data());
  weighted_rows(w.data(), v, count, n, false, y.data());
  for (int p = 0; p < count; ++p) {
    double want = 0, magnitude = 0;
    for (int i = 0; i < n; ++i) {
      want += q[i] * keys[std::size_t(p) * n + i];
      magnitude += std::fabs(q[i] * keys[std::size_t(p) * n + i]);
    }
    ASSERT_NEAR(scores[p], want / 8, 1e-6 * (magnitude + 1)) << n << " row " << p;
  }
  EXPECT_EQ(scores[count], -1.f);
  for (int i = 0; i < n; ++i) {
    double want = 0, magnitude = 0;
    for (int p = 0; p < count; ++p) {
      want += w[p] * values[std::size_t(p) * n + i];
      magnitude += std::fabs(w[p] * values[std::size_t(p) * n + i]);
    }
    ASSERT_NEAR(y[i], want, 1e-6 * (magnitude + 1)) << n << " column " << i;
  }
  EXPECT_EQ(y[n], -1.f);
  std::vector<float> ref_scores(count), ref_y(n);
  dot_rows_reference(q.data(), k, count, n, 8.f, ref_scores.data());
  weighted_rows_reference(w.data(), v, count, n, false, ref_y.data());
  for (int p = 0; p < count; ++p)
    ASSERT_NEAR(ref_scores[p], scores[p], 1e-5 * (1 + std::fabs(scores[p])));
  for (int i = 0; i < n; ++i) ASSERT_NEAR(ref_y[i], y[i], 1e-5 * (1 + std::fabs(y[i])));
}

// The cache's bf16 and int8 rows, as a query at the last stored position reads them:
// kv_value and decode_rows give what the type's definition gives (expected_rows), and
// dot_rows / weighted_rows on them match float64 sums of those values, every length
// tail, 1 to 70 positions (int8: rounded groups, then the query's own exact ones).
TEST(VectorKernels, QuantizedCacheRowsMatchFloat64OfTheirDecodedValues) {
  std::mt19937 rng(53);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const KvType type : {KvType::int8, KvType::bf16})
    for (int n = 1; n <= 160; n += (n < 40 ? 1 : 11))
      for (int count : {1, 3, 4, 9, 33, 64, 70}) {
        KvCache cache(1, count, 1, n, type);
        std::vector<float> keys(std::size_t(count) * n), values(keys.size());
        for (float& x : keys) x = normal(rng);
        for (float& x : values) x = 3.f * normal(rng);
        cache.begin_rows(0);
        for (int p = 0; p < count; ++p)
          cache.store(0, 0, p, keys.data() + std::size_t(p) * n,
                      values.data() + std::size_t(p) * n);
        const KvRows k = cache.keys(0, 0, 0, count - 1), v = cache.values(0, 0, 0, count - 1);
        const std::vector<double> want_k = expected_rows(type, true, keys, count, n);
        const std::vector<double> want_v = expected_rows(type, false, values, count, n);
        std::vector<float> block(std::size_t(count) * n);
        for (const auto& [rows, want] : {std::pair{k, &want_k}, std::pair{v, &want_v}}) {
          for (int p = 0; p < count; ++p)
            for (int i = 0; i < n; ++i) {
              const double x = (*want)[std::size_t(p) * n + i];
              ASSERT_NEAR(kv_value(rows, p, i), x, 1e-7 * std::fabs(x)) << n << " row " << p;
            }
          decode_rows(rows, count, n, block.data());
          for (int p = 0; p < count; ++p)
            for (int i = 0; i < n; ++i)
              ASSERT_EQ(block[std::size_t(p) * n + i], kv_value(rows, p, i)) << n;
        }
        expect_sums_of_decoded(k, want_k, v, want_v, count, n, rng);
        cache.end_rows(0);
        if (type != KvType::int8) continue;
        // The plain int8 form (one scale a row, no exact rows), which the kernels read
        // without decoding.
        std::vector<std::int8_t> q(keys.size());
        std::vector<std::uint16_t> scales(count);
        std::vector<double> decoded(keys.size());
        for (int p = 0; p < count; ++p) {
          float absmax = 0;
          for (int i = 0; i < n; ++i)
            absmax = std::max(absmax, std::fabs(keys[std::size_t(p) * n + i]));
          const auto scale = static_cast<_Float16>(absmax / 127.f);
          scales[p] = std::bit_cast<std::uint16_t>(scale);
          for (int i = 0; i < n; ++i) {
            const std::size_t at = std::size_t(p) * n + i;
            q[at] = static_cast<std::int8_t>(std::round(keys[at] / float(scale)));
            decoded[at] = double(scale) * q[at];
          }
        }
        const KvRows plain{KvType::int8, q.data(), scales.data(), n};
        ASSERT_TRUE(plain.plain());
        expect_sums_of_decoded(plain, decoded, plain, decoded, count, n, rng);
      }
}

// The integer q . k of int8 keys (dot_rows_int8_keys): the query of each rounded group
// is the definition's int8 vector (same float operations: the same bytes), each score is
// t * (exact integer sum) / divisor bit for bit, the own group's exact rows match float64;
// every head_dim tail, 1 to 100 positions, read from every block start.
TEST(VectorKernels, IntegerDotOfInt8KeysIsTheRoundedQueryTimesTheStoredIntegers) {
  std::mt19937 rng(67);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int n : {8, 16, 24, 32, 40, 64, 96, 128})
    for (int count : {1, 31, 32, 33, 64, 100}) {
      KvCache cache(1, count, 1, n, KvType::int8);
      std::vector<float> keys(std::size_t(count) * n), q(n);
      for (float& x : keys) x = normal(rng);
      for (int i = 0; i < n; ++i) q[i] = (i % 7 == 3 ? 20.f : 1.f) * normal(rng);  // outliers
      cache.begin_rows(0);
      for (int p = 0; p < count; ++p)
        cache.store(0, 0, p, keys.data() + std::size_t(p) * n, keys.data() + std::size_t(p) * n);
      const KvRows k = cache.keys(0, 0, 0, count - 1);
      const int own_group = (count - 1) / KvCache::kGroup * KvCache::kGroup;
      std::vector<float> want(count);
      for (int p = 0; p < count; ++p) {
        if (p >= own_group) {
          double sum = 0;
          for (int i = 0; i < n; ++i) sum += double(q[i]) * keys[std::size_t(p) * n + i];
          want[p] = float(sum / 8);
          continue;
        }
        const std::uint16_t* stored = k.channel_scales + std::size_t(p / KvCache::kGroup) * n;
        std::vector<float> scales(n);
        for (int i = 0; i < n; ++i) scales[i] = float(std::bit_cast<_Float16>(stored[i]));
        const float* s = scales.data();
        float absmax = 0;
        for (int i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(q[i] * s[i]));
        const float t = absmax / 127.f;
        std::vector<std::int8_t> a(n), got(n);
        for (int i = 0; i < n; ++i) a[i] = std::int8_t(std::nearbyint(q[i] * s[i] / t));
        ASSERT_EQ(quantize_query(q.data(), s, n, got.data()).scale, t);
        ASSERT_EQ(got, a) << n;
        std::int64_t dot = 0;
        for (int i = 0; i < n; ++i)
          dot +=
              a[i] * std::int64_t(static_cast<const std::int8_t*>(k.data)[std::size_t(p) * n + i]);
        want[p] = t * float(dot) / 8.f;
      }
      for (int first : {0, 1, 4, 31, 32, 70})
        if (first < count) {
          std::vector<float> scores(count + 1, -1.f);
          dot_rows_int8_keys(q.data(), k.from(first), count - first, n, 8.f, scores.data());
          for (int p = first; p < count; ++p) {
            if (p < own_group)
              ASSERT_EQ(scores[p - first], want[p]) << n << " row " << p << " from " << first;
            else
              ASSERT_NEAR(scores[p - first], want[p], 1e-5 * (1 + std::fabs(want[p])));
          }
          EXPECT_EQ(scores[count - first], -1.f);
        }
      cache.end_rows(0);
    }
}

TEST(KvCache, BytesPerTypeAndBlocksOfQuantizedRowsGiveTheSameFloats) {
  const KvCache f32(2, 10, 3, 64), bf16(2, 10, 3, 64, KvType::bf16),
      int8(2, 10, 3, 64, KvType::int8);
  EXPECT_EQ(f32.bytes(), 2u * 2 * 10 * 3 * 64 * 4);
  EXPECT_EQ(bf16.bytes() * 2, f32.bytes());
  // A quarter, plus an f16 scale per value row, one per key channel and group, and the f32
  // residual (32 rows a layer and head) and staging (31 + 10 rows a head), keys and values.
  EXPECT_EQ(int8.bytes(), 2u * 2 * 10 * 3 * 64 + 2 * (2 * 10 * 3 + 2 * 3 * 64) +
                              4 * 2 * (2 * 3 * 32 * 64 + 3 * 41 * 64));
  // TinyLlama's dims: 0.281x f32 at 2048 positions; each further position costs
  // (64 + 2 + 64 + 64 * 2 / 32) / (2 * 64 * 4) = 0.2617x of f32's.
  const KvCache long_int8(22, 2048, 4, 64, KvType::int8), long_f32(22, 2048, 4, 64);
  EXPECT_LT(double(long_int8.bytes()) / double(long_f32.bytes()), 0.282);
  const KvCache longer_int8(22, 4096, 4, 64, KvType::int8), longer_f32(22, 4096, 4, 64);
  EXPECT_NEAR(double(longer_int8.bytes() - long_int8.bytes()) /
                  double(longer_f32.bytes() - long_f32.bytes()),
              134.0 / 512, 1e-12);
  EXPECT_THROW(parse_kv_type("int4"), Error);
  std::mt19937 rng(59);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const KvType type : {KvType::int8, KvType::bf16}) {
    const int n = 72, count = 70;
    KvCache cache(1, count, 1, n, type);
    std::vector<float> row(n), q(n), w(count);
    cache.begin_rows(0);
    for (int p = 0; p < count; ++p) {
      for (float& x : row) x = normal(rng);
      cache.store(0, 0, p, row.data(), row.data());
    }
    for (float& x : q) x = normal(rng);
    for (float& x : w) x = normal(rng);
    const KvRows keys = cache.keys(0, 0, 0, count - 1), values = cache.values(0, 0, 0, count - 1);
    std::vector<float> whole(count), blocked(count), y_whole(n), y_blocked(n);
    dot_rows(q.data(), keys, count, n, 8.f, whole.data());
    weighted_rows(w.data(), values, count, n, false, y_whole.data());
    for (int p0 = 0; p0 < count; p0 += 20) {
      const int m = std::min(20, count - p0);
      dot_rows(q.data(), keys.from(p0), m, n, 8.f, blocked.data() + p0);
      weighted_rows(w.data() + p0, values.from(p0), m, n, p0 > 0, y_blocked.data());
    }
    EXPECT_EQ(whole, blocked);
    EXPECT_EQ(y_whole, y_blocked);
    cache.end_rows(0);
  }
}

// Every query position of an int8 cache sees the same floats however the rows were
// batched: one position a call, calls of 7, one call of all, and two sequences stored
// interleaved in the same calls. Going back into the open group reads its rows exactly;
// going back into a rounded group reads its earlier rows as their int8 values.
TEST(KvCache, Int8RowsSeenByAQueryDoNotDependOnTheBatching) {
  constexpr int n = 24, count = 100, heads = 2, layers = 2;
  std::mt19937 rng(61);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> keys(std::size_t(count) * heads * n), values(keys.size());
  for (float& x : keys) x = normal(rng);
  for (float& x : values) x = normal(rng);
  auto key_row = [&](int p) { return keys.data() + std::size_t(p) * heads * n; };
  auto value_row = [&](int p) { return values.data() + std::size_t(p) * heads * n; };
  // What each query position sees: keys then values of both heads, decoded, per layer.
  using Seen = std::vector<std::vector<float>>;
  auto seen_at = [&](const KvCache& cache, int layer, int sequence, int p) {
    std::vector<float> out;
    for (int h = 0; h < heads; ++h)
      for (const KvRows& rows :
           {cache.keys(layer, h, sequence, p), cache.values(layer, h, sequence, p)}) {
        std::vector<float> block(std::size_t(p + 1) * n);
        decode_rows(rows, p + 1, n, block.data());
        out.insert(out.end(), block.begin(), block.end());
      }
    return out;
  };
  auto batched = [&](int call_rows, int sequences) {
    std::vector<Seen> seen(std::size_t(sequences), Seen(std::size_t(layers) * count));
    KvCache cache(layers, count, heads, n, KvType::int8, sequences, call_rows);
    for (int first = 0; first < count; first += call_rows)
      for (int layer = 0; layer < layers; ++layer) {
        const int last = std::min(count, first + call_rows);
        cache.begin_rows(layer);
        for (int p = first; p < last; ++p)
          for (int s = 0; s < sequences; ++s) cache.store(layer, s, p, key_row(p), value_row(p));
        for (int p = first; p < last; ++p)
          for (int s = 0; s < sequences; ++s)
            seen[std::size_t(s)][std::size_t(layer) * count + p] = seen_at(cache, layer, s, p);
        cache.end_rows(layer);
      }
    return seen;
  };
  const Seen one_by_one = batched(1, 1)[0];
  for (const auto& [call_rows, sequences] : {std::pair{7, 1}, {count, 1}, {7, 2}, {count, 3}})
    for (const Seen& seen : batched(call_rows, sequences))
      EXPECT_EQ(seen, one_by_one) << call_rows << " rows a call, " << sequences << " sequences";

  // Back into the open group (positions 96..99 of 128): rows 96.. are still exact.
  KvCache cache(1, 128, heads, n, KvType::int8, 1, count);
  cache.begin_rows(0);
  for (int p = 0; p < count; ++p) cache.store(0, 0, p, key_row(p), value_row(p));
  const std::vector<float> rounded_at_99 = seen_at(cache, 0, 0, 99);
  cache.end_rows(0);
  cache.begin_rows(0);
  cache.store(0, 0, 98, key_row(98), value_row(98));
  EXPECT_EQ(seen_at(cache, 0, 0, 98), one_by_one[98]);
  cache.end_rows(0);
  // Back into rounded group 1 (32..63) at 40: rows 32..39 as their int8 values, as a
  // query after the group saw them.
  cache.begin_rows(0);
  cache.store(0, 0, 40, key_row(40), value_row(40));
  const std::vector<float> at_40 = seen_at(cache, 0, 0, 40);
  for (int h = 0; h < heads; ++h)
    for (int part = 0; part < 2; ++part) {  // keys, values
      const std::size_t from = (std::size_t(h) * 2 + part) * 41 * n;
      const std::size_t from_99 = (std::size_t(h) * 2 + part) * 100 * n;
      for (int p = 0; p < 40; ++p)
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(at_40[from + std::size_t(p) * n + i],
                    rounded_at_99[from_99 + std::size_t(p) * n + i])
              << "head " << h << " part " << part << " row " << p;
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(at_40[from + 40u * n + i], (part == 0 ? key_row(40) : value_row(40))[h * n + i]);
    }
  cache.end_rows(0);
  // Out of order within a call, and reads outside the call, are errors.
  cache.begin_rows(0);
  cache.store(0, 0, 10, key_row(10), value_row(10));
  EXPECT_THROW(cache.store(0, 0, 12, key_row(12), value_row(12)), Error);
  EXPECT_THROW(cache.keys(0, 0, 0, 11), Error);
  cache.end_rows(0);
  EXPECT_THROW(cache.keys(0, 0, 0, 10), Error);
}

}  // namespace
}  // namespace qforge
