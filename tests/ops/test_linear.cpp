// The call site: thread splits, the code cache under concurrency, W^X code pages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "jit/base/error.h"
#include "jit/core/code_cache.h"
#include "ops/linear/call_split.h"
#include "ops/linear/quantized_linear.h"
#include "ops/ref/gemm_reference.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

struct Layer {
  std::vector<float> w, x;
  QuantizedLinear linear;
};

Layer make_layer(std::int64_t n, std::int64_t k, std::int64_t m, const char* scheme,
                 std::uint64_t seed) {
  auto w = test::random_floats(n * k, seed, 0.05f);
  auto x = test::random_floats(m * k, seed + 1, 1.f);
  PackedWeights packed = pack_weights(w.data(), n, k, parse_quant_scheme(scheme), 1);
  return Layer{std::move(w), std::move(x), QuantizedLinear(std::move(packed), Epilogue{})};
}

// The 300 x 512 calls run on the caller alone below kMinOpsToSplit; the 2000 x 1024 GEMV
// is split into chunks (call_split.h).
TEST(QuantizedLinear, MatchesReferenceForEveryThreadCount) {
  struct Shape {
    std::int64_t n, k, m;
  };
  for (const char* scheme : {"int8", "int4-g128", "int8-g64-asym"})
    for (const Shape s :
         {Shape{300, 512, 1}, Shape{300, 512, 3}, Shape{300, 512, 17}, Shape{2000, 1024, 1}}) {
      const std::int64_t n = s.n, k = s.k, m = s.m;
      const Layer layer = make_layer(n, k, m, scheme, m + 5);
      QuantizedActivations xq;
      std::vector<float> want(m * n);
      prepare_activations(xq, m, k, layer.linear.weights().header.k_padded,
                          layer.linear.weights().header.group);
      quantize_activations(layer.x.data(), k, xq);
      gemm_reference(layer.linear.weights(), xq, Epilogue{}, {}, want.data(), n);
      for (int threads : {1, 2, 3, 7}) {
        ThreadPool pool(threads);
        std::vector<float> got(m * n, -7.f);
        QuantizedActivations scratch;
        layer.linear.forward(layer.x.data(), m, k, scratch, {}, got.data(), n, pool);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << scheme << " " << n << " x " << k << " M " << m << " threads " << threads;
      }
    }
}

// Every unit of a split call is dealt exactly once; a GEMV's chunks stream at least
// kMinChunkBytes (but the last) in whole unit blocks where they hold one, a GEMM's go down
// to single units.
TEST(RunSplit, DealsEveryUnitOnceInChunksOfTheMinimumSize) {
  EXPECT_EQ(min_chunk_units(1, 16896), 4);  // int4-g128 K = 2048: 16.5 KiB a unit
  EXPECT_EQ(min_chunk_units(4, 1 << 20), 1);
  EXPECT_EQ(min_chunk_units(kStreamingRows + 1, 16896), 1);
  for (int threads : {2, 3})
    for (std::int64_t m : {1, 4, 64})
      for (std::int64_t units : {1, 5, 128, 1001})
        for (std::int64_t block : {1, 3, 7}) {
          const CallUnits call_units{units, 8704, block};
          GemmCallArgs call;
          call.m = m;
          ThreadPool pool(threads);
          std::mutex lock;
          std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
          run_split(call, call_units, 1e12, CallRows{}, ThreadSplit::units, pool,
                    [&](const GemmCallArgs& part) {
                      std::lock_guard<std::mutex> hold(lock);
                      chunks.emplace_back(part.unit_begin, part.unit_end);
                    });
          std::sort(chunks.begin(), chunks.end());
          std::int64_t next = 0;
          const std::int64_t least = min_chunk_units(m, call_units.bytes_each);
          const std::string what = "M " + std::to_string(m) + " units " + std::to_string(units) +
                                   " block " + std::to_string(block);
          for (const auto& [begin, end] : chunks) {
            EXPECT_EQ(begin, next) << what;
            EXPECT_TRUE(end - begin >= least || end == units)
                << what << " chunk " << begin << ".." << end;
            if (m <= kStreamingRows && end != units && end - begin >= block) {
              EXPECT_EQ((end - begin) % block, 0) << what << " chunk " << begin << ".." << end;
            }
            next = end;
          }
          EXPECT_EQ(next, units) << what << " threads " << threads;
          if (m > kStreamingRows && units == 1001) {
            EXPECT_GT(chunks.size(), 20u);
          }
        }
}

// The chunks of a 2048-column int4-g128 GEMV (128 units of 16.5 KiB, 1 x 7 tiles) on two
// threads, in the order they are dealt: whole blocks while a chunk holds one.
TEST(RunSplit, GemvChunksAreWholeUnitBlocks) {
  const CallUnits units{128, 16896, 7};
  std::vector<std::int64_t> sizes;
  for (std::int64_t left = units.count; left > 0;) {
    sizes.push_back(next_chunk_units(units, 1, 2, left));
    left -= sizes.back();
  }
  EXPECT_EQ(sizes, (std::vector<std::int64_t>{63, 28, 14, 7, 7, 4, 4, 1}));
  // A GEMM's chunks are not cut: 1 / (2 T) of what is left.
  EXPECT_EQ(next_chunk_units(units, 64, 2, 128), 32);
}

TEST(QuantizedLinear, HonoursTheIsaCap) {
  const Isa saved = max_isa();
  set_max_isa(Isa::avx2);
  const Layer layer = make_layer(32, 64, 1, "int8", 3);
  EXPECT_LE(layer.linear.isa(), Isa::avx2);
  set_max_isa(saved);
}

TEST(CodeCache, ConcurrentCallersGetIdenticalResults) {
  std::vector<Layer> layers;
  for (int i = 0; i < 6; ++i)
    layers.push_back(make_layer(40 + 16 * i, 64 * (i + 1), 2, i % 2 ? "int4-g64" : "int8", i));
  std::vector<std::vector<float>> expected;
  ThreadPool single(1);
  for (const Layer& l : layers) {
    std::vector<float> y(2 * l.linear.weights().n());
    QuantizedActivations scratch;
    l.linear.forward(l.x.data(), 2, l.linear.weights().k(), scratch, {}, y.data(),
                     l.linear.weights().n(), single);
    expected.push_back(y);
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t)
    callers.emplace_back([&, t] {
      ThreadPool pool(1);
      QuantizedActivations scratch;
      for (int round = 0; round < 50; ++round) {
        const Layer& l = layers[(t + round) % layers.size()];
        std::vector<float> y(2 * l.linear.weights().n());
        l.linear.forward(l.x.data(), 2, l.linear.weights().k(), scratch, {}, y.data(),
                         l.linear.weights().n(), pool);
        if (y != expected[(t + round) % layers.size()]) ++mismatches;
      }
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(CodeCache, NoPageIsWritableAndExecutable) {
  const Layer layer = make_layer(64, 256, 4, "int4-g32-asym", 9);
  CodeCache::global().warmup(layer.linear.warmup_keys());
  ASSERT_GT(CodeCache::global().size(), 0u);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int executable = 0;
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range, perms;
    fields >> range >> perms;
    if (perms.size() >= 3 && perms[2] == 'x') ++executable;
    EXPECT_FALSE(perms[1] == 'w' && perms[2] == 'x') << line;
  }
  EXPECT_GT(executable, 0);
}

// Prefill calls split their activation rows over the pool: the bytes, scales and group
// sums equal one whole call's, dynamic and static, for row counts around the split
// threshold; a non-finite value in another thread's rows is still reported by name.
TEST(QuantizeSplit, MatchesOneWholeCallBitForBit) {
  ThreadPool pool(2);
  const std::int64_t k = 100, kp = 128, g = 32;
  for (const std::int64_t m : {1, 7, 8, 9, 33, 512})
    for (const float scale : {0.f, 0.01f}) {
      const auto x = test::random_floats(m * k, m, 1.5f);
      QuantizedActivations split, whole;
      prepare_activations(split, m, k, kp, g);
      prepare_activations(whole, m, k, kp, g);
      quantize_split(x.data(), k, scale, split, pool);
      if (scale == 0.f)
        quantize_activations(x.data(), k, whole);
      else
        quantize_activations_static(x.data(), k, scale, whole);
      for (std::int64_t r = 0; r < m; ++r) {
        ASSERT_EQ(split.scale[r], whole.scale[r]) << "M " << m << " row " << r;
        ASSERT_EQ(std::memcmp(split.row(r), whole.row(r), kp), 0) << "M " << m << " row " << r;
        for (std::int64_t j = 0; j < kp / g; ++j) ASSERT_EQ(split.sums(r)[j], whole.sums(r)[j]);
      }
    }
  auto bad = test::random_floats(33 * k, 5, 1.f);
  bad[30 * k + 4] = std::nanf("");
  QuantizedActivations q;
  prepare_activations(q, 33, k, kp, g);
  try {
    quantize_split(bad.data(), k, 0.f, q, pool);
    ADD_FAILURE() << "NaN quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x[30][4] is not finite"), std::string::npos) << e.what();
  }
}

// The norm fused into the quantizing pass: the same bytes, scales and group sums as
// rmsnorm into memory and quantizing that (dynamic and static, split over the pool or not,
// K with and without tails), and the layer's output equal to forward() of the normalized
// rows; a non-finite input is still named by its row.
TEST(QuantizeNormalized, EqualsRmsnormThenQuantizeBitForBit) {
  ThreadPool pool(2);
  for (const std::int64_t k : {37, 200, 2051})
    for (const std::int64_t m : {1, 9, 512})
      for (const float scale : {0.f, 0.02f}) {
        SCOPED_TRACE(testing::Message() << "K " << k << " M " << m << " scale " << scale);
        const std::int64_t kp = (k + 63) / 64 * 64, g = 32;
        const auto x = test::random_floats(m * k, m + k, 3.f);
        const auto gain = test::random_floats(k, k, 1.f);
        const RmsNorm norm{gain.data(), 1e-5f};
        std::vector<float> normalized(m * k);
        for (std::int64_t r = 0; r < m; ++r)
          rmsnorm(normalized.data() + r * k, x.data() + r * k, norm, k);
        QuantizedActivations fused, whole;
        prepare_activations(fused, m, k, kp, g);
        prepare_activations(whole, m, k, kp, g);
        quantize_normalized_split(x.data(), k, norm, scale, fused, pool);
        quantize_split(normalized.data(), k, scale, whole, pool);
        for (std::int64_t r = 0; r < m; ++r) {
          ASSERT_EQ(fused.scale[r], whole.scale[r]) << "row " << r;
          ASSERT_EQ(std::memcmp(fused.row(r), whole.row(r), kp), 0) << "row " << r;
          for (std::int64_t j = 0; j < kp / g; ++j) ASSERT_EQ(fused.sums(r)[j], whole.sums(r)[j]);
        }
        if (scale != 0.f || m > 9) continue;
        const std::int64_t n = 48;
        const auto w = test::random_floats(n * k, k + 1, 0.05f);
        const QuantizedLinear linear(pack_weights(w.data(), n, k, parse_quant_scheme("int8"), 1),
                                     Epilogue{});
        std::vector<float> got(m * n), want(m * n);
        QuantizedActivations scratch;
        linear.forward_normalized(x.data(), m, k, norm, scratch, {}, got.data(), n, pool);
        linear.forward(normalized.data(), m, k, scratch, {}, want.data(), n, pool);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
  const std::int64_t k = 200;
  auto bad = test::random_floats(33 * k, 5, 1.f);
  bad[30 * k + 4] = std::nanf("");
  const auto gain = test::random_floats(k, 6, 1.f);
  QuantizedActivations q;
  prepare_activations(q, 33, k, 256, 32);
  try {
    quantize_normalized_split(bad.data(), k, RmsNorm{gain.data(), 1e-5f}, 0.f, q, pool);
    ADD_FAILURE() << "NaN quantized";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x[30]["), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge
