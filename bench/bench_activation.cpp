// Static against dynamic int8 activations on a prefill-sized call: the quantization pass
// alone (a per-row max pass and a quantize pass, or the quantize pass with the calibrated
// scale) and the whole layer (that pass plus the int8 kernel), timed in turns in one run.
//   build/bench/bench_activation --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// Counters: static_pass_ratio = static pass time / dynamic pass time, static_layer_ratio
// the same for the layer (< 1: static is faster); split_pass_ratio = the dynamic pass
// split over the pool's threads (quantize_split, what QuantizedLinear runs) / on one.
// BM_NormFusedActivations: the RMSNorm in front of qkv / gate-up fused into that pass
// (quantize_normalized_split) against the norm writing f32 rows (one thread, as the
// executor ran it) and then the split pass; fused_ratio = fused / separate for the pass,
// layer_ratio for norm + pass + kernel, each dynamic and static.
// BM_SplitActivations: one decode row split into D s8 digit rows (split_activations.h, the
// weight-only decode operand of a VNNI ISA) against the f32 copy the float weight-only
// kernels read and the one s8 row W8A8 reads; split_us, copy_us, quantize_us (medians).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "bench/bench_timing.h"
#include "ops/linear/quantized_linear.h"
#include "ops/norm/rmsnorm.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"
#include "ops/quant/pack.h"
#include "ops/quant/split_activations.h"

namespace {

using qforge::bench::Clock;
using qforge::bench::median;
using qforge::bench::seconds_since;

// An N x K int8 layer of N(0, 0.02) weights.
qforge::QuantizedLinear int8_layer(std::int64_t n, std::int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 0.02f);
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& v : w) v = dist(rng);
  return qforge::QuantizedLinear(
      qforge::pack_weights(w.data(), n, k, qforge::parse_quant_scheme("int8"), 2),
      qforge::Epilogue{});
}

// M x K activations through an N x K int8 layer, threads 2.
void BM_StaticActivations(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(std::size_t(m * k)), y(std::size_t(m * n));
  const qforge::QuantizedLinear layer = int8_layer(n, k, rng);
  float top = 0;
  for (float& v : x) top = std::max(top, std::fabs(v = dist(rng)));
  qforge::ThreadPool pool(2);
  qforge::QuantizedActivations xq;
  const auto& header = layer.weights().header;
  qforge::prepare_activations(xq, m, k, header.k_padded, header.group);
  const float scale = top / 127.f;
  std::vector<double> pass_dynamic, pass_static, pass_split, layer_dynamic, layer_static;
  for (int warm = 0; warm < 2; ++warm) layer.forward(xq, {}, y.data(), n, pool);
  for (auto _ : state) {
    auto start = Clock::now();
    qforge::quantize_activations(x.data(), k, xq);
    pass_dynamic.push_back(seconds_since(start));
    layer.forward(xq, {}, y.data(), n, pool);
    layer_dynamic.push_back(seconds_since(start));
    start = Clock::now();
    qforge::quantize_activations_static(x.data(), k, scale, xq);
    pass_static.push_back(seconds_since(start));
    layer.forward(xq, {}, y.data(), n, pool);
    layer_static.push_back(seconds_since(start));
    start = Clock::now();
    qforge::quantize_split(x.data(), k, 0.f, xq, pool);
    pass_split.push_back(seconds_since(start));
    state.SetIterationTime(layer_static.back());
  }
  state.counters["M"] = double(m);
  state.counters["N"] = double(n);
  state.counters["K"] = double(k);
  state.counters["dynamic_pass_us"] = median(pass_dynamic) * 1e6;
  state.counters["static_pass_us"] = median(pass_static) * 1e6;
  state.counters["static_pass_ratio"] = median(pass_static) / median(pass_dynamic);
  state.counters["static_layer_ratio"] = median(layer_static) / median(layer_dynamic);
  state.counters["pass_share_dynamic"] = median(pass_dynamic) / median(layer_dynamic);
  state.counters["split_pass_ratio"] = median(pass_split) / median(pass_dynamic);
}

// M rows of K through RMSNorm into an N x K int8 layer, threads 2; range(3) 1: static.
void BM_NormFusedActivations(benchmark::State& state) {
  const std::int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const bool fixed = state.range(3) != 0;
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.f, 1.f);
  const qforge::QuantizedLinear layer = int8_layer(n, k, rng);
  std::vector<float> x(static_cast<std::size_t>(m * k)), gain(static_cast<std::size_t>(k));
  std::vector<float> normalized(std::size_t(m * k)), y(std::size_t(m * n));
  for (float& v : x) v = dist(rng);
  for (float& v : gain) v = 1.f + 0.1f * dist(rng);
  const qforge::RmsNorm norm{gain.data(), 1e-5f};
  qforge::ThreadPool pool(2);
  qforge::QuantizedActivations xq;
  const auto& header = layer.weights().header;
  qforge::prepare_activations(xq, m, k, header.k_padded, header.group);
  const float scale = fixed ? 6.f / 127.f : 0.f;
  std::vector<double> separate, fused, layer_separate, layer_fused;
  for (int warm = 0; warm < 2; ++warm) layer.forward(xq, {}, y.data(), n, pool);
  for (auto _ : state) {
    auto start = Clock::now();
    for (std::int64_t r = 0; r < m; ++r)
      qforge::rmsnorm(normalized.data() + r * k, x.data() + r * k, norm, k);
    qforge::quantize_split(normalized.data(), k, scale, xq, pool);
    separate.push_back(seconds_since(start));
    layer.forward(xq, {}, y.data(), n, pool);
    layer_separate.push_back(seconds_since(start));
    start = Clock::now();
    qforge::quantize_normalized_split(x.data(), k, norm, scale, xq, pool);
    fused.push_back(seconds_since(start));
    layer.forward(xq, {}, y.data(), n, pool);
    layer_fused.push_back(seconds_since(start));
    state.SetIterationTime(layer_fused.back());
  }
  state.counters["M"] = double(m);
  state.counters["N"] = double(n);
  state.counters["K"] = double(k);
  state.counters["static"] = fixed ? 1 : 0;
  state.counters["separate_us"] = median(separate) * 1e6;
  state.counters["fused_us"] = median(fused) * 1e6;
  state.counters["fused_ratio"] = median(fused) / median(separate);
  state.counters["layer_ratio"] = median(layer_fused) / median(layer_separate);
  state.counters["separate_share"] = median(separate) / median(layer_separate);
}

// One row of K, D digits (range 1); the three preparations in turns.
void BM_SplitActivations(benchmark::State& state) {
  const std::int64_t k = state.range(0);
  const int digits = static_cast<int>(state.range(1));
  std::mt19937 rng(2);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(k));
  for (float& v : x) v = dist(rng);
  qforge::QuantizedActivations split, xq;
  qforge::FloatActivations xf;
  qforge::prepare_split_activations(split, digits, 1, k, k, 128);
  qforge::prepare_activations(xq, 1, k, k, 128);
  qforge::prepare_float_activations(xf, 1, k, k, 128, digits == 3 ? 8 : 4);
  std::vector<double> split_s, copy_s, quantize_s;
  for (auto _ : state) {
    auto start = Clock::now();
    qforge::split_activation_rows(x.data(), k, digits, 0, 1, split);
    split_s.push_back(seconds_since(start));
    start = Clock::now();
    qforge::copy_float_activation_rows(x.data(), k, 0, 1, xf);
    copy_s.push_back(seconds_since(start));
    start = Clock::now();
    qforge::quantize_activations(x.data(), k, xq);
    quantize_s.push_back(seconds_since(start));
    state.SetIterationTime(split_s.back());
  }
  state.counters["K"] = double(k);
  state.counters["digits"] = digits;
  state.counters["split_us"] = median(split_s) * 1e6;
  state.counters["copy_us"] = median(copy_s) * 1e6;
  state.counters["quantize_us"] = median(quantize_s) * 1e6;
}

// TinyLlama's qkv (2048 -> 2560) and down (5632 -> 2048) at a 512-token prefill, and a
// decode row.
BENCHMARK(BM_StaticActivations)
    ->Args({512, 2560, 2048})
    ->Args({512, 2048, 5632})
    ->Args({1, 2560, 2048})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// TinyLlama's qkv (2048 -> 2560) and gate/up (2048 -> 2 x 5632) at a 512-token prefill,
// and a decode row; dynamic and static.
BENCHMARK(BM_NormFusedActivations)
    ->ArgsProduct({{512}, {2560, 11264}, {2048}, {0, 1}})
    ->Args({1, 2560, 2048, 0})
    ->Args({1, 2560, 2048, 1})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// TinyLlama's K: 2048 (qkv, wo, gate/up) and 5632 (down); int4's two digits, int8's three.
BENCHMARK(BM_SplitActivations)
    ->ArgsProduct({{2048, 5632}, {2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
