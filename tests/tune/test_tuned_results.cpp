// Tuning changes speed only: a layer gives the same bytes under every blocking of the
// search space, and a whole model gives the same logits with and without a tuning table
// (one that moves every kernel off its default blocking).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "jit/gemm/blocking_space.h"
#include "jit/gemm/register_budget.h"
#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "model/runtime/llama_executor.h"
#include "model/runtime/model_loader.h"
#include "ops/linear/quantized_linear.h"
#include "tests/support/isa_cap.h"
#include "tests/support/model_paths.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

// Installs, for a run on `threads` threads, a table holding `blocking` for `key` as
// measured on `entry_threads` threads.
void install_one(const GemmKey& key, const Blocking& blocking, int threads, int entry_threads) {
  TuningDb db(cpu_signature());
  TunedKernel tuned;
  tuned.blocking = blocking;
  db.set(tuning_key_of(key, entry_threads), tuned);
  install_tuning(std::move(db), threads);
}

struct LayerCase {
  const char* scheme;
  Epilogue epilogue;
  std::int64_t m;
};

// The layer of a case: N x K random weights (a gate/up pair for SwiGLU), packed.
QuantizedLinear layer_of(const LayerCase& c, std::int64_t n, std::int64_t k, unsigned seed) {
  const QuantScheme scheme = parse_quant_scheme(c.scheme);
  const auto w = test::random_floats(2 * n * k, seed, 0.05f);
  PackedWeights packed = c.epilogue.swiglu
                             ? pack_swiglu_pair(w.data(), w.data() + n * k, n, k, scheme, 1)
                             : pack_weights(w.data(), n, k, scheme, 1);
  return QuantizedLinear(std::move(packed), c.epilogue, best_isa(),
                         scheme.weight_only ? ActivationKind::f32 : ActivationKind::s8);
}

// y = layer(x) for M random rows, with the case's bias / residual / u8 output arguments.
std::vector<float> run_layer(const QuantizedLinear& layer, const LayerCase& c, std::int64_t m,
                             std::int64_t n, std::int64_t k, ThreadPool& pool, unsigned seed) {
  const auto x = test::random_floats(m * k, seed, 1.f);
  const auto bias = test::random_floats(n, seed + 1, 0.5f);
  const auto residual = test::random_floats(m * n, seed + 2, 1.f);
  EpilogueArgs args;
  args.bias = c.epilogue.bias ? bias.data() : nullptr;
  args.residual = c.epilogue.residual ? residual.data() : nullptr;
  args.ld_residual = n;
  args.out_scale = 0.02f;
  args.out_zero_point = 128;
  std::vector<float> y(m * n, -3.f);
  if (layer.weight_only()) {
    FloatActivations scratch;
    layer.forward_weight_only(x.data(), m, k, scratch, args, y.data(), n, pool);
  } else {
    QuantizedActivations scratch;
    layer.forward(x.data(), m, k, scratch, args, y.data(), n, pool);
  }
  return y;
}

TEST(TunedResults, EveryBlockingOfTheSpaceGivesTheSameBytes) {
  const std::int64_t n = 200, k = 320;
  int compared = 0;
  for (const LayerCase& c :
       {LayerCase{"int8", {}, 1}, LayerCase{"int4-g64-asym", {}, 3},
        LayerCase{"int8-g32", {.residual = true}, 9}, LayerCase{"int4-g32", {.swiglu = true}, 1},
        LayerCase{"int8", {.bias = true, .output = OutputKind::u8}, 6},
        LayerCase{"woq-int4-g64", {}, 3}, LayerCase{"woq-int8", {.residual = true}, 1}})
    for (int threads : {1, 2}) {
      clear_tuning();
      const QuantizedLinear layer = layer_of(c, n, k, 11);
      ThreadPool pool(threads);
      auto run = [&] { return run_layer(layer, c, c.m, n, k, pool, 12); };
      const GemmKey key = layer.key_for(c.m);
      const Blocking original = key.blocking;
      ASSERT_EQ(original, default_blocking(key));
      const std::vector<float> want = run();
      const std::vector<Blocking> space = blocking_candidates(key);
      ASSERT_GT(space.size(), 4u) << kernel_name(key);
      for (const Blocking& b : space) {
        install_one(key, b, threads, threads);
        ASSERT_EQ(layer.key_for(c.m).blocking, b);  // the table really is in use
        ASSERT_EQ(layer.plan_for(c.m).code->key(), layer.key_for(c.m));  // and calls see it
        const std::vector<float> got = run();
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << kernel_name(layer.key_for(c.m)) << " threads " << threads;
        ++compared;
      }
      // A table for another thread count is not used.
      install_one(key, space.back(), threads, threads + 1);
      EXPECT_EQ(layer.key_for(c.m).blocking, original);
    }
  clear_tuning();
  EXPECT_GT(compared, 50);
}

// The call policies change speed only: with the GEMV/GEMM threshold at 2 or 9 and large
// calls split by rows, every M gives the same bytes as the defaults.
TEST(TunedResults, CallPoliciesGiveTheSameBytes) {
  // The vector kernels' tuning: no AMX keys on AMX hosts either.
  const test::ScopedIsaCap cap(Isa::avx512_vnni);
  const std::int64_t n = 176, k = 256;
  const int threads = 2;
  ThreadPool pool(threads);
  int compared = 0;
  for (const LayerCase& c :
       {LayerCase{"int8", {}, 0}, LayerCase{"int4-g32-asym", {}, 0},
        LayerCase{"int8-g64", {.residual = true}, 0}, LayerCase{"int4-g64", {.swiglu = true}, 0},
        LayerCase{"int8", {.bias = true, .output = OutputKind::u8}, 0},
        LayerCase{"woq-int4-g64", {}, 0}, LayerCase{"woq-int8-g32", {.swiglu = true}, 0}}) {
    clear_tuning();
    const QuantizedLinear layer = layer_of(c, n, k, 21);
    auto run = [&](std::int64_t m) {
      return run_layer(layer, c, m, n, k, pool, 22 + static_cast<unsigned>(m));
    };
    const std::vector<std::int64_t> ms = {1, 2, 3, 4, 5, 6, 8, 9, 10, 33, 64};
    std::vector<std::vector<float>> want;
    for (std::int64_t m : ms) want.push_back(run(m));
    for (const int gemm_min : {2, 9}) {
      TuningDb db(cpu_signature());
      GemmKey small = layer.key_for(1), large = layer.key_for(1);
      small.bucket = MBucket::small;
      large.bucket = MBucket::large;
      TunedKernel gemv, gemm;
      gemv.blocking = default_blocking(small);
      gemv.gemm_min_m = gemm_min;
      gemm.blocking = default_blocking(large);
      gemm.thread_split = ThreadSplit::rows;
      db.set(tuning_key_of(small, threads), gemv);
      db.set(tuning_key_of(large, threads), gemm);
      install_tuning(std::move(db), threads);
      EXPECT_EQ(layer.key_for(gemm_min - 1).bucket, gemm_min == 2 ? MBucket::one : MBucket::small);
      EXPECT_EQ(layer.key_for(gemm_min).bucket, MBucket::large);
      EXPECT_EQ(tuned_thread_split(layer.key_for(64)), ThreadSplit::rows);
      // The layer's calls, planned before the table came, follow it now.
      EXPECT_EQ(layer.plan_for(gemm_min).code->key(), layer.key_for(gemm_min));
      EXPECT_EQ(layer.plan_for(64).split, ThreadSplit::rows);
      for (std::size_t i = 0; i < ms.size(); ++i) {
        const std::vector<float> got = run(ms[i]);
        ASSERT_EQ(std::memcmp(got.data(), want[i].data(), got.size() * sizeof(float)), 0)
            << c.scheme << " M " << ms[i] << " GEMM from " << gemm_min;
        ++compared;
      }
    }
  }
  clear_tuning();
  EXPECT_EQ(compared, 7 * 2 * 11);
}

// Every kernel of the model moved to the last (most different) blocking of its space;
// small-M shapes switch to the GEMM kernel only from M = 9 and large-M calls split by rows.
TuningDb everything_off_default(const std::vector<GemmKey>& keys, int threads) {
  TuningDb db(cpu_signature());
  for (const GemmKey& key : keys) {
    const std::vector<Blocking> space = blocking_candidates(key);
    TunedKernel tuned;
    tuned.blocking = space.back();
    if (key.bucket == MBucket::small) tuned.gemm_min_m = 9;
    if (key.bucket == MBucket::large) tuned.thread_split = ThreadSplit::rows;
    db.set(tuning_key_of(key, threads), tuned);
  }
  return db;
}

std::vector<float> logits(const std::string& path, const std::string& quant, int threads) {
  LoadedModel model = load_model(path, parse_precision(quant), "", threads);
  ThreadPool pool(threads);
  LlamaExecutor executor(model.weights, pool, 16);
  const std::vector<int> prompt = {1, 403, 407, 261, 378, 11, 7};
  std::vector<float> out;
  const auto prefill = executor.forward(prompt, 0, /*all_logits=*/true);
  out.assign(prefill.begin(), prefill.end());
  const int next[] = {42};
  const auto decode = executor.forward(next, static_cast<int>(prompt.size()));
  out.insert(out.end(), decode.begin(), decode.end());
  return out;
}

TEST(TunedResults, ModelLogitsAreIdenticalWithAndWithoutTuning) {
  // The vector kernels' tuning: no AMX keys on AMX hosts either.
  const test::ScopedIsaCap cap(Isa::avx512_vnni);
  const std::string path = test::model_path("stories260K/stories260K.gguf");
  for (const char* quant : {"int8", "int4-g32"})
    for (int threads : {1, 2}) {
      clear_tuning();
      const std::vector<float> want = logits(path, quant, threads);
      std::vector<GemmKey> keys;
      {
        const LoadedModel model = load_model(path, parse_precision(quant), "", threads);
        keys = model.weights.warmup_keys();
      }
      install_tuning(everything_off_default(keys, threads), threads);
      const TunedCount count = count_tuned(keys);
      EXPECT_EQ(count.tuned, count.total);
      int moved = 0;
      for (const GemmKey& key : keys) moved += !(tuned_blocking(key) == default_blocking(key));
      EXPECT_GT(moved, 0);
      const std::vector<float> got = logits(path, quant, threads);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
          << quant << " threads " << threads;
    }
  clear_tuning();
}

}  // namespace
}  // namespace qforge
