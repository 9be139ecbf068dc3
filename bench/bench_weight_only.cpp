// Weight-only layers (f32 activations, the FMA kernels) against the W8A8 layer of the
// same packed weights and against the machine's limits, in one run:
//
//   build/bench/bench_weight_only [--benchmark_filter=...]
//
// Per case (N, K, M, bits, threads, math) the two layers run whole calls (activation copy or
// quantization included) in turns; for M <= 4 each rotates through enough weight copies
// to span 8x the reported L3, at most 1 GiB (cold_weight_copies), so memory, not cache,
// is timed.
// Counters (medians):
//   GBps, bw_ratio        packed bytes read per second by the weight-only layer, and that
//                         over this machine's streaming read bandwidth (same threads)
//   bw_ratio_paired       (M <= 4) the same over a plain read of the same bytes timed
//                         between the calls, call by call (ops/tune/paired_read.h), for
//                         hosts whose bandwidth drifts
//   GFLOPS, fma_ratio     2 M N K per second, and that over the f32 FMA peak
//   bf16_ratio            the same over the vdpbf16ps peak, where it runs natively
//   vs_w8a8               W8A8 time / weight-only time (above 1: weight-only is faster)
// math 0: f32 FMA kernels; 1: vdpbf16ps on bf16 activations (int4, registered where
// AVX512-BF16 runs natively); 2: the automatic math, whose one-row calls split into s8
// digit rows on a VNNI ISA (M = 1, registered where a VNNI ISA runs; the activation split
// is timed with the call). The label's kernel name says which ran.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_timing.h"
#include "bench/bench_weights.h"
#include "jit/cpu/cpu_info.h"
#include "jit/tune/machine_limits.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/pack.h"
#include "ops/tune/paired_read.h"

namespace qforge::bench {
namespace {

// Args: N, K, M, bits (8: int8 per-channel, 4: int4-g128), threads, math (0 f32, 1 bf16,
// 2 automatic: split one-row calls).
void BM_WeightOnly(benchmark::State& state) {
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const int bits = static_cast<int>(state.range(3)), threads = static_cast<int>(state.range(4));
  const bool bf16 = state.range(5) == 1, split = state.range(5) == 2;
  const QuantScheme scheme = parse_quant_scheme(bits == 8 ? "int8" : "int4-g128");
  std::vector<float> w(static_cast<std::size_t>(n * k));
  std::mt19937 rng(static_cast<unsigned>(n + k));
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (auto& v : w) v = dist(rng);
  const PackedWeights first = pack_weights(w.data(), n, k, scheme, 2);
  w = {};
  const std::int64_t bytes = first.geometry.total_bytes;
  const int copies = rotation_copies(m, bytes);
  std::vector<std::unique_ptr<QuantizedLinear>> woq, w8a8;
  const WeightOnlyMath saved = weight_only_math();
  // bf16 only where asked for below; the split only under the automatic math
  set_weight_only_math(split ? WeightOnlyMath::automatic : WeightOnlyMath::f32);
  for (int c = 0; c < copies; ++c) {
    woq.push_back(std::make_unique<QuantizedLinear>(
        copy_of(first), Epilogue{}, best_isa(), bf16 ? ActivationKind::bf16 : ActivationKind::f32));
    w8a8.push_back(std::make_unique<QuantizedLinear>(copy_of(first), Epilogue{}));
  }
  set_weight_only_math(saved);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = dist(rng) * 50;
  std::vector<float> y(static_cast<std::size_t>(m * n));
  ThreadPool pool(threads);
  FloatActivations xf;
  QuantizedActivations xq;
  auto run_woq = [&](int c) {
    woq[c]->forward_weight_only(x.data(), m, k, xf, {}, y.data(), n, pool);
  };
  auto run_w8a8 = [&](int c) { w8a8[c]->forward(x.data(), m, k, xq, {}, y.data(), n, pool); };
  for (int warm = 0; warm < 2; ++warm)
    for (int c = 0; c < copies; ++c) run_woq(c), run_w8a8(c);
  std::vector<double> woq_times, w8a8_times;
  std::unique_ptr<PairedReadProbe> read_probe;
  if (m <= 4) read_probe = std::make_unique<PairedReadProbe>(bytes, copies, pool);
  int turn = 0;
  for (auto _ : state) {
    const int c = rotation_turn(turn, copies);
    auto start = Clock::now();
    run_woq(c);
    woq_times.push_back(seconds_since(start));
    state.SetIterationTime(woq_times.back());
    if (read_probe) read_probe->probe(turn);
    start = Clock::now();
    run_w8a8(c);
    w8a8_times.push_back(seconds_since(start));
    ++turn;
  }
  const double tw = median(woq_times), tq = median(w8a8_times);
  const double gbps = double(bytes) / tw / 1e9;
  const double gflops = 2.0 * double(m) * double(n) * double(k) / tw / 1e9;
  state.counters["M"] = double(m);
  state.counters["N"] = double(n);
  state.counters["K"] = double(k);
  state.counters["bits"] = bits;
  state.counters["threads"] = threads;
  state.counters["bf16_math"] = bf16 ? 1 : 0;
  state.counters["split_digits"] = m == 1 ? woq[0]->split_digits() : 0;
  state.counters["GBps"] = gbps;
  state.counters["bw_ratio"] = gbps / read_bandwidth_gbps(threads);
  if (read_probe)
    state.counters["bw_ratio_paired"] = read_probe->paired_ratio(double(bytes), woq_times);
  state.counters["GFLOPS"] = gflops;
  state.counters["fma_ratio"] = gflops / fma_peak_gflops(threads);
  if (const double bf16 = bf16_peak_gflops(threads); bf16 > 0)
    state.counters["bf16_ratio"] = gflops / bf16;
  state.counters["vs_w8a8"] = tq / tw;
  state.SetLabel(
      kernel_name(m == 1 && woq[0]->split_digits() ? woq[0]->split_key() : woq[0]->key_for(m)));
}

// The floating-point limits: f32 FMA (zmm or ymm), vdpbf16ps and tdpbf16ps (skipped with
// the reason where they do not run natively).
void BM_FloatPeaks(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(fma_peak_gflops(threads));
  state.counters["threads"] = threads;
  state.counters["fma_GFLOPS"] = fma_peak_gflops(threads);
  std::string why_bf16, why_amx;
  state.counters["bf16_GFLOPS"] = bf16_peak_gflops(threads, 5'000'000, &why_bf16);
  state.counters["amx_bf16_GFLOPS"] = amx_bf16_peak_gflops(threads, 2'000'000, &why_amx);
  std::string label = fma_peak_instruction();
  if (!why_bf16.empty()) label += "; " + why_bf16;
  if (!why_amx.empty()) label += "; " + why_amx;
  state.SetLabel(label);
}

void register_all() {
  for (int t : {1, 2})
    benchmark::RegisterBenchmark("BM_FloatPeaks", BM_FloatPeaks)->Arg(t)->Iterations(1);
  const std::int64_t shapes[][2] = {{2048, 2048}, {5632, 2048}, {2048, 5632}};
  const bool bf16_native = bf16_weight_only_native();
  const bool vnni = isa_usable(Isa::avx512_vnni) || isa_usable(Isa::avx_vnni);
  for (int bits : {8, 4})
    for (int math : {0, 1, 2}) {
      if (math == 1 && (bits != 4 || !bf16_native)) continue;
      if (math == 2 && !vnni) continue;
      for (std::int64_t m : {1, 4, 128}) {
        if (math == 2 && m != 1) continue;
        for (int t : {1, 2})
          for (const auto& s : shapes)
            benchmark::RegisterBenchmark("BM_WeightOnly", BM_WeightOnly)
                ->Args({s[0], s[1], m, bits, t, math})
                ->UseManualTime()
                ->MinTime(0.5)
                ->Unit(benchmark::kMicrosecond);
      }
    }
}

}  // namespace
}  // namespace qforge::bench

int main(int argc, char** argv) {
  qforge::bench::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("fma_peak_instruction", qforge::fma_peak_instruction());
  benchmark::AddCustomContext("cpu", qforge::cpu_info().brand);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
