// Packing throughput: GB/s of f32 source weights quantized + packed, per scheme and
// thread count, at Llama-sized matrices.
//   build/bench/bench_pack --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "ops/quant/pack.h"

namespace {

const std::vector<float>& source(std::int64_t n, std::int64_t k) {
  static std::vector<float> w;
  if (static_cast<std::int64_t>(w.size()) != n * k) {
    w.resize(n * k);
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.f, 0.02f);
    for (auto& v : w) v = dist(rng);
  }
  return w;
}

void BM_Pack(benchmark::State& state, const char* scheme_name) {
  const std::int64_t n = state.range(0), k = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const qforge::QuantScheme scheme = qforge::parse_quant_scheme(scheme_name);
  const auto& w = source(n, k);
  for (auto _ : state) {
    auto packed = qforge::pack_weights(w.data(), n, k, scheme, threads);
    benchmark::DoNotOptimize(packed.data.data());
  }
  const double bytes = double(n) * k * sizeof(float);
  state.counters["GBps"] =
      benchmark::Counter(bytes * state.iterations() / 1e9, benchmark::Counter::kIsRate);
  state.counters["N"] = double(n);
  state.counters["K"] = double(k);
  state.counters["threads"] = threads;
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    b->Args({2048, 2048, threads});
    b->Args({5632, 2048, threads});
    b->Args({4096, 4096, threads});
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Pack, int8, "int8")->Apply(shapes);
BENCHMARK_CAPTURE(BM_Pack, int8_g128_asym, "int8-g128-asym")->Apply(shapes);
BENCHMARK_CAPTURE(BM_Pack, int4_g128, "int4-g128")->Apply(shapes);
BENCHMARK_CAPTURE(BM_Pack, int4_g32_asym, "int4-g32-asym")->Apply(shapes);

}  // namespace

BENCHMARK_MAIN();
