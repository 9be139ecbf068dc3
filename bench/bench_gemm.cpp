// qforge kernels vs oneDNN vs the machine's limits, in one process and one run.
//
//   build/bench/bench_gemm [--benchmark_format=json] [--benchmark_filter=...]
//
// Per case (M, N, K, bits, group, threads) qforge and then oneDNN (u8s8, same shape and
// thread count) run the same number of calls in the same process; reported:
//   GBps        packed weight + scale bytes read per second by qforge
//   GOPS        2 M N K per second
//   bw_ratio    GBps / this machine's streaming read bandwidth (same thread count)
//   bw_ratio_paired  (M <= 4) the same over a plain read of the same bytes timed between
//               qforge's calls, call by call (ops/tune/paired_read.h), for hosts whose
//               bandwidth drifts; bw_ratio_paired_medians: the two series' medians instead
//   peak_ratio  GOPS / this machine's int8 dot-product peak (same thread count)
//   vs_onednn   oneDNN time / qforge time (median over the iterations)
// For M <= 4 both rotate through enough weight copies to span 8x the reported L3 size, at
// most 1 GiB (cold_weight_copies), so memory, not cache, is measured. oneDNN has no int4 matmul:
// int4 cases are compared with oneDNN's int8 on the same shape. BM_LinearAmx puts the AMX kernel
// beside the zmm one over M (skipped, with the reason, where AMX does not run natively).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench/bench_timing.h"
#include "bench/bench_weights.h"
#include "bench/onednn_matmul.h"
#include "jit/cpu/cpu_info.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/tune/machine_limits.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/pack.h"
#include "ops/tune/paired_read.h"

namespace qforge::bench {
namespace {

// The scheme BM_Linear packs, by form:
//   0  the GEMV / GEMM targets' schemes: int8 per-channel, int4 g128 (and int5 g32, Q5_0's)
//   1  two-level scales, the forms GGUF's K-quants repack into: Q6_K's int8 g16, Q5_K's
//      int5 g32 asymmetric and Q4_K's int4 g32 asymmetric
//   2  the GGUF block size g32: Q8_0's int8 g32 and Q4_0's int4 g32
enum LinearForm : int { kTargetForm = 0, kTwoLevelForm = 1, kBlockG32Form = 2 };
QuantScheme linear_scheme(int bits, int form) {
  if (form == kTwoLevelForm)
    return parse_quant_scheme(bits == 8   ? "int8-g16-sb256"
                              : bits == 5 ? "int5-g32-sb256-asym"
                                          : "int4-g32-sb256-asym");
  if (form == kBlockG32Form) return parse_quant_scheme(bits == 8 ? "int8-g32" : "int4-g32");
  return parse_quant_scheme(bits == 8 ? "int8" : bits == 5 ? "int5-g32" : "int4-g128");
}

// Args: N, K, M, bits, threads, swiglu, form. With swiglu = 1 the layer is a fused
// gate/up pair (2 N x K weights, N outputs silu(g) * u) and oneDNN runs the unfused 2N x K
// matmul; form picks the scheme (linear_scheme).
void BM_Linear(benchmark::State& state) {
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const int bits = static_cast<int>(state.range(3)), threads = static_cast<int>(state.range(4));
  const bool swiglu = state.range(5) != 0;
  const std::int64_t weight_rows = swiglu ? 2 * n : n;  // rows of weights read
  const QuantScheme scheme = linear_scheme(bits, static_cast<int>(state.range(6)));

  std::vector<float> w(static_cast<std::size_t>(weight_rows * k));
  std::mt19937 rng(static_cast<unsigned>(n + k));
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (auto& v : w) v = dist(rng);
  const PackedWeights first = swiglu ? pack_swiglu_pair(w.data(), w.data() + n * k, n, k, scheme, 2)
                                     : pack_weights(w.data(), n, k, scheme, 2);
  w = {};
  const std::int64_t packed_bytes = first.geometry.total_bytes;
  const int copies = rotation_copies(m, packed_bytes);
  Epilogue epilogue;
  epilogue.swiglu = swiglu;
  std::vector<std::unique_ptr<QuantizedLinear>> layers;
  for (int c = 0; c < copies; ++c)
    layers.push_back(std::make_unique<QuantizedLinear>(copy_of(first), epilogue));

  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = dist(rng) * 50;
  QuantizedActivations xq;
  prepare_activations(xq, m, k, first.header.k_padded, first.header.group);
  quantize_activations(x.data(), k, xq);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  ThreadPool pool(threads);

  set_onednn_threads(threads);
  OnednnInt8Matmul onednn(m, weight_rows, k, 1);
  const int onednn_copies = rotation_copies(m, onednn.weight_bytes());
  OnednnInt8Matmul onednn_rotating(m, weight_rows, k, onednn_copies);
  std::vector<std::uint8_t> src(static_cast<std::size_t>(m * k), 130);
  std::vector<float> dst(static_cast<std::size_t>(m * weight_rows));

  for (int warm = 0; warm < 2; ++warm) {  // first touch, code generation, oneDNN setup
    for (int c = 0; c < copies; ++c) layers[c]->forward(xq, {}, y.data(), n, pool);
    for (int c = 0; c < onednn_copies; ++c) onednn_rotating.run(c, src.data(), dst.data());
  }
  // The two libraries run in separate phases with a pause between them, so neither one's
  // idle-spinning worker threads steal the cores from the other (2-core machines).
  auto let_spinners_sleep = [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); };
  let_spinners_sleep();
  std::vector<double> qforge_times, onednn_times;
  std::unique_ptr<PairedReadProbe> read_probe;
  if (m <= 4) read_probe = std::make_unique<PairedReadProbe>(packed_bytes, copies, pool);
  int turn = 0;
  for (auto _ : state) {
    const QuantizedLinear& layer = *layers[rotation_turn(turn, copies)];
    const auto start = Clock::now();
    layer.forward(xq, {}, y.data(), n, pool);
    const double tq = seconds_since(start);
    state.SetIterationTime(tq);
    qforge_times.push_back(tq);
    if (read_probe) read_probe->probe(turn);
    ++turn;
  }
  let_spinners_sleep();
  for (std::size_t i = 0; i < qforge_times.size(); ++i) {
    const auto start = Clock::now();
    onednn_rotating.run(static_cast<int>(i % onednn_copies), src.data(), dst.data());
    onednn_times.push_back(seconds_since(start));
  }
  const double tq = median(qforge_times), to = median(onednn_times);
  const double gbps = double(packed_bytes) / tq / 1e9;
  const double gops = 2.0 * double(m) * weight_rows * k / tq / 1e9;
  state.counters["M"] = double(m);
  state.counters["N"] = double(n);
  state.counters["swiglu"] = swiglu ? 1 : 0;
  state.counters["K"] = double(k);
  state.counters["bits"] = bits;
  state.counters["group"] = scheme.group;
  state.counters["superblock"] = scheme.superblock;
  state.counters["threads"] = threads;
  state.counters["isa_zmm"] = layers[0]->isa() == Isa::avx512_vnni ? 1 : 0;
  state.counters["GBps"] = gbps;
  state.counters["GOPS"] = gops;
  state.counters["bw_ratio"] = gbps / read_bandwidth_gbps(threads);
  if (read_probe) {
    state.counters["bw_ratio_paired"] =
        read_probe->paired_ratio(double(packed_bytes), qforge_times);
    state.counters["bw_ratio_paired_medians"] = gbps / read_probe->gbps();
  }
  state.counters["peak_ratio"] = gops / dot_peak_gops(threads);
  const bool on_tiles = layers[0]->key_for(m).isa == Isa::amx;
  state.counters["isa_amx"] = on_tiles ? 1 : 0;
  if (on_tiles) state.counters["amx_peak_ratio"] = gops / amx_peak_gops(threads);
  state.counters["vs_onednn"] = to / tq;
  state.counters["onednn_GBps"] = double(onednn.weight_bytes()) / to / 1e9;
  state.SetLabel(kernel_name(layers[0]->key_for(m)));
}

// AMX tiles against the zmm kernel on the same layer and rows, alternating call by call:
//   GOPS_amx, GOPS_zmm   2 M N K per second (median call)
//   amx_vs_zmm           zmm time / AMX time: above 1 AMX wins at this M; the smallest
//                        such M is the threshold (amx_min_rows) worth setting on this CPU
// AMX is forced for every M here. Without native AMX the case is skipped with the reason:
// the instruction emulator says nothing about speed.
void BM_LinearAmx(benchmark::State& state) {
  if (!(hardware_isa_mask(cpu_info()) & isa_bit(Isa::amx))) {
    state.SkipWithError(("AMX is not usable natively: " + cpu_info().amx_reason).c_str());
    return;
  }
  const std::int64_t n = state.range(0), k = state.range(1), m = state.range(2);
  const int bits = static_cast<int>(state.range(3)), threads = static_cast<int>(state.range(4));
  const int group = static_cast<int>(state.range(5));  // 0: int8 per-channel / int4 g128
  std::vector<float> w(static_cast<std::size_t>(n * k));
  std::mt19937 rng(static_cast<unsigned>(n + k));
  std::normal_distribution<float> dist(0.f, 0.02f);
  for (auto& v : w) v = dist(rng);
  const std::string scheme = group > 0 ? "int" + std::to_string(bits) + "-g" + std::to_string(group)
                             : bits == 8 ? "int8"
                                         : "int4-g128";
  const PackedWeights packed = pack_weights(w.data(), n, k, parse_quant_scheme(scheme), 2);
  const std::int64_t threshold = amx_min_rows();
  set_amx_min_rows(1);
  const QuantizedLinear amx(copy_of(packed), Epilogue{}, Isa::amx);
  const QuantizedLinear zmm(copy_of(packed), Epilogue{}, Isa::avx512_vnni);
  std::vector<float> x(static_cast<std::size_t>(m * k));
  for (auto& v : x) v = dist(rng) * 50;
  QuantizedActivations xq;
  prepare_activations(xq, m, k, packed.header.k_padded, packed.header.group);
  quantize_activations(x.data(), k, xq);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  ThreadPool pool(threads);
  for (int warm = 0; warm < 2; ++warm) {
    amx.forward(xq, {}, y.data(), n, pool);
    zmm.forward(xq, {}, y.data(), n, pool);
  }
  std::vector<double> amx_times, zmm_times;
  for (auto _ : state) {
    auto start = Clock::now();
    amx.forward(xq, {}, y.data(), n, pool);
    amx_times.push_back(seconds_since(start));
    start = Clock::now();
    zmm.forward(xq, {}, y.data(), n, pool);
    zmm_times.push_back(seconds_since(start));
    state.SetIterationTime(amx_times.back());
  }
  set_amx_min_rows(threshold);
  const double ops = 2.0 * double(m) * double(n) * double(k);
  const double ta = median(amx_times), tz = median(zmm_times);
  state.counters["M"] = double(m);
  state.counters["N"] = double(n);
  state.counters["K"] = double(k);
  state.counters["bits"] = bits;
  state.counters["threads"] = threads;
  state.counters["group"] = group;
  state.counters["GOPS_amx"] = ops / ta / 1e9;
  state.counters["GOPS_zmm"] = ops / tz / 1e9;
  state.counters["amx_peak_ratio"] = ops / ta / 1e9 / amx_peak_gops(threads);
  state.counters["amx_vs_zmm"] = tz / ta;
  state.SetLabel(kernel_name(amx.key_for(m)));
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(read_bandwidth_gbps(threads));
  state.counters["GBps"] = read_bandwidth_gbps(threads);
  state.counters["threads"] = threads;
}

// tdpbsud throughput (jit/tune/amx_peak_kernel.h), the AMX GEMM's limit; skipped with the
// reason where AMX does not run natively.
void BM_AmxPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::string why;
  if (amx_peak_gops(threads, 2'000'000, &why) == 0) {
    state.SkipWithError(why.c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(amx_peak_gops(threads));
  state.counters["GOPS"] = amx_peak_gops(threads);
  state.counters["threads"] = threads;
  state.SetLabel("tdpbsud");
}

void BM_DotPeak(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(dot_peak_gops(threads));
  state.counters["GOPS"] = dot_peak_gops(threads);
  state.counters["threads"] = threads;
  state.SetLabel(dot_peak_instruction());
}

// Generation time of one kernel (what warm-up pays per distinct layer shape).
void BM_JitGeneration(benchmark::State& state) {
  const PackedHeader h =
      make_packed_header(state.range(0), state.range(1),
                         parse_quant_scheme(state.range(2) == 8 ? "int8" : "int4-g128"));
  GemmKey key;
  key.isa = static_cast<Isa>(state.range(4));
  key.n = h.n;
  key.k = h.k;
  key.k_padded = h.k_padded;
  key.group = h.group;
  key.bits = h.bits;
  key.bucket = bucket_of(state.range(3));
  key.blocking = default_blocking(key);
  for (auto _ : state) {
    GemmGenerator generator(key);
    benchmark::DoNotOptimize(generator.kernel());
  }
  state.SetLabel(kernel_name(key));
}

// Fixed cost of one call: a tiny layer (one unit, one group) through the pool.
void BM_CallOverhead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> w(32 * 64, 0.01f), x(64, 1.f), y(32);
  QuantizedLinear layer(pack_weights(w.data(), 32, 64, parse_quant_scheme("int8"), 1), Epilogue{});
  QuantizedActivations xq;
  prepare_activations(xq, 1, 64, layer.weights().header.k_padded, layer.weights().header.group);
  quantize_activations(x.data(), 64, xq);
  ThreadPool pool(threads);
  for (auto _ : state) layer.forward(xq, {}, y.data(), 32, pool);
  state.counters["threads"] = threads;
}

void register_all() {
  for (int t : {1, 2}) {
    benchmark::RegisterBenchmark("BM_ReadBandwidth", BM_ReadBandwidth)->Arg(t)->Iterations(1);
    benchmark::RegisterBenchmark("BM_DotPeak", BM_DotPeak)->Arg(t)->Iterations(1);
    benchmark::RegisterBenchmark("BM_AmxPeak", BM_AmxPeak)->Arg(t)->Iterations(1);
  }
  const std::int64_t shapes[][2] = {{2048, 2048}, {5632, 2048},  {2048, 5632},
                                    {4096, 4096}, {11008, 4096}, {4096, 11008}};
  // BM_Linear over the given bits, 1 and 2 threads, rows and shapes.
  const auto linear = [](std::initializer_list<std::int64_t> ms,
                         std::initializer_list<const std::int64_t*> layer_shapes, int swiglu,
                         int form, std::initializer_list<int> bits_list = {8, 4}) {
    for (int bits : bits_list)
      for (std::int64_t m : ms)
        for (int t : {1, 2})
          for (const std::int64_t* s : layer_shapes)
            benchmark::RegisterBenchmark("BM_Linear", BM_Linear)
                ->Args({s[0], s[1], m, bits, t, swiglu, form})
                ->UseManualTime()
                ->MinTime(0.5)
                ->Unit(benchmark::kMicrosecond);
  };
  linear({1, 4, 32, 128}, {shapes[0], shapes[1], shapes[2], shapes[3], shapes[4], shapes[5]}, 0,
         kTargetForm);
  // the fused gate/up (SwiGLU) projections of TinyLlama and Llama-2-7B
  linear({1, 128}, {shapes[1], shapes[4]}, 1, kTargetForm);
  // the K-quant forms (Q6_K: int8 g16, Q4_K: int4 g32 asym, two-level) on TinyLlama's
  // shapes
  linear({1, 128}, {shapes[0], shapes[1], shapes[2]}, 0, kTwoLevelForm, {8, 5, 4});
  // int5 g32 (Q5_0's form), one-level
  linear({1, 128}, {shapes[0], shapes[1], shapes[2]}, 0, kTargetForm, {5});
  // int8 g32 and int4 g32 (Q8_0's and Q4_0's form: what a native file's decode runs)
  linear({1, 128}, {shapes[0], shapes[1], shapes[2]}, 0, kBlockG32Form);
  // and their fused gate/up pair: a native file's largest prefill kernel
  linear({128}, {shapes[1]}, 1, kBlockG32Form);
  // int8 per-channel, int4 g128, and the GGUF block size g32 (K steps of 32 on tiles)
  for (const auto& [bits, group] : {std::pair{8, 0}, {4, 0}, {8, 32}, {4, 32}})
    for (std::int64_t m : {4, 8, 16, 32, 64, 128})
      for (int t : {1, 2})
        for (const auto& s : {shapes[3], shapes[4]})
          benchmark::RegisterBenchmark("BM_LinearAmx", BM_LinearAmx)
              ->Args({s[0], s[1], m, bits, t, group})
              ->UseManualTime()
              ->MinTime(0.5)
              ->Unit(benchmark::kMicrosecond);
  const int isas[] = {int(Isa::avx2), int(Isa::avx_vnni), int(Isa::avx512_vnni)};
  for (int isa : isas)
    for (std::int64_t m : {1, 4, 128})
      benchmark::RegisterBenchmark("BM_JitGeneration", BM_JitGeneration)
          ->Args({4096, 11008, 4, m, isa})
          ->Args({11008, 4096, 8, m, isa})
          ->Unit(benchmark::kMicrosecond);
  for (int t : {1, 2})
    benchmark::RegisterBenchmark("BM_CallOverhead", BM_CallOverhead)
        ->Arg(t)
        ->Unit(benchmark::kNanosecond);
}

}  // namespace
}  // namespace qforge::bench

int main(int argc, char** argv) {
  qforge::bench::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("dot_peak_instruction", qforge::dot_peak_instruction());
  benchmark::AddCustomContext("cpu", qforge::cpu_info().brand);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
