#include "jit/tune/machine_limits.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "jit/base/aligned_buffer.h"
#include "jit/cpu/cpu_info.h"
#include "jit/tune/amx_peak_kernel.h"
#include "jit/tune/dot_peak_kernel.h"
#include "jit/tune/float_peak_kernel.h"

namespace qforge {

int cold_weight_copies(std::int64_t bytes, std::int64_t max_bytes) {
  const double l3 = double(std::max<std::uint64_t>(cpu_info().l3_bytes, 8u << 20));
  const double span = std::min(kColdWeightsL3Multiple * l3, double(max_bytes));
  return static_cast<int>(span / double(std::max<std::int64_t>(bytes, 1))) + 2;
}
namespace {

using Clock = std::chrono::steady_clock;

template <typename Body>
double run_threads_seconds(int threads, Body&& body) {
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (int t = 1; t < threads; ++t) workers.emplace_back(body, t);
  body(0);
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

__attribute__((target("avx2"))) std::uint64_t read_stream(const std::uint8_t* p,
                                                          std::size_t bytes) {
  __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (std::size_t i = 0; i < bytes; i += 128) {
    acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    acc2 = _mm256_add_epi64(acc2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    acc3 = _mm256_add_epi64(acc3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3));
  std::uint64_t out[4];
  std::memcpy(out, &s, 32);
  return out[0] + out[1] + out[2] + out[3];
}

// The same bytes as four concurrent streams (the quarters of the region) with software
// prefetch 1 KiB ahead in each: the access pattern of a GEMV over several panels.
__attribute__((target("avx2"))) std::uint64_t read_four_streams(const std::uint8_t* p,
                                                                std::size_t bytes) {
  const std::size_t quarter = bytes / 4 / 64 * 64;
  const std::uint8_t* q[4] = {p, p + quarter, p + 2 * quarter, p + 3 * quarter};
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                    _mm256_setzero_si256()};
  for (std::size_t i = 0; i < quarter; i += 64)
    for (int s = 0; s < 4; ++s) {
      _mm_prefetch(reinterpret_cast<const char*>(q[s] + i + 1024), _MM_HINT_T0);
      const __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(q[s] + i));
      const __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(q[s] + i + 32));
      acc[s] = _mm256_add_epi64(acc[s], _mm256_add_epi64(a, b));
    }
  const __m256i s =
      _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3]));
  std::uint64_t out[4];
  std::memcpy(out, &s, 32);
  return out[0] + out[1] + out[2] + out[3];
}

namespace {

DotKind dot_kind() {
  const IsaFlags& f = cpu_info().isa;
  if (f.avx512_vnni) return DotKind::zmm;
  if (f.avx_vnni) return DotKind::ymm_vnni;
  return DotKind::avx2;
}

}  // namespace

double sample_read_bandwidth_gbps(int threads, std::size_t bytes_per_thread) {
  const std::size_t per_thread = bytes_per_thread / 128 * 128;  // whole read_stream steps
  AlignedBuffer<std::uint8_t> buffer(per_thread * threads);
  std::memset(buffer.data(), 1, buffer.size());  // fault every page in first
  std::vector<std::uint64_t> sink(threads);
  double best = 0;
  // the better of two patterns, each three times: one sequential stream per thread, and
  // four prefetched streams per thread
  for (int rep = 0; rep < 6; ++rep) {
    const double s = run_threads_seconds(threads, [&](int t) {
      const std::uint8_t* p = buffer.data() + t * per_thread;
      sink[t] += rep % 2 ? read_four_streams(p, per_thread) : read_stream(p, per_thread);
    });
    best = std::max(best, double(per_thread) * threads / s / 1e9);
  }
  return best;
}

double read_bandwidth_gbps(int threads, std::size_t bytes_per_thread) {
  static std::map<std::pair<int, std::size_t>, double> cache;
  const std::pair<int, std::size_t> args{threads, bytes_per_thread};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  return cache[args] = sample_read_bandwidth_gbps(threads, bytes_per_thread);
}

namespace {

// GOPS (2 per multiply-add) of `kernel.run(iterations)` on every thread at once, the best
// of three runs; `macs` is one thread's multiply-adds.
template <typename Kernel>
double peak_gops_of(const Kernel& kernel, int threads, std::int64_t iterations, double macs) {
  std::vector<std::int64_t> sink(threads);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s =
        run_threads_seconds(threads, [&](int t) { sink[t] += kernel.run(iterations); });
    best = std::max(best, 2 * macs * threads / s / 1e9);
  }
  return best;
}

}  // namespace

double dot_peak_gops(int threads, std::int64_t iterations) {
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const DotPeakKernel kernel(dot_kind());
  const double macs =
      double(kernel.accumulators()) * double(iterations) * kernel.multiply_adds_per_step();
  return cache[args] = peak_gops_of(kernel, threads, iterations, macs);
}

double amx_peak_gops(int threads, std::int64_t iterations, std::string* why) {
  const CpuInfo& cpu = cpu_info();
  if (!cpu.amx_usable) {
    if (why) *why = "AMX is not usable natively: " + cpu.amx_reason;
    return 0;
  }
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const AmxPeakKernel kernel;
  const double macs = double(AmxPeakKernel::kTileProducts) * double(iterations) *
                      AmxPeakKernel::kMultiplyAddsPerProduct;
  return cache[args] = peak_gops_of(kernel, threads, iterations, macs);
}

namespace {

bool zmm_native() {
  const CpuInfo& cpu = cpu_info();
  return cpu.isa.avx512f && cpu.isa.os_zmm;
}

}  // namespace

double fma_peak_gflops(int threads, std::int64_t iterations) {
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const FloatPeakKernel kernel(zmm_native() ? FloatPeakKind::fma_zmm : FloatPeakKind::fma_ymm);
  const double macs =
      double(FloatPeakKernel::kAccumulators) * double(iterations) * kernel.multiply_adds_per_step();
  return cache[args] = peak_gops_of(kernel, threads, iterations, macs);
}

std::string fma_peak_instruction() {
  return zmm_native() ? "vfmadd231ps zmm" : "vfmadd231ps ymm";
}

double bf16_peak_gflops(int threads, std::int64_t iterations, std::string* why) {
  if (!(zmm_native() && cpu_info().isa.avx512_bf16)) {
    if (why) *why = "AVX512-BF16 (vdpbf16ps) does not run natively on this CPU";
    return 0;
  }
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const FloatPeakKernel kernel(FloatPeakKind::bf16_zmm);
  const double macs =
      double(FloatPeakKernel::kAccumulators) * double(iterations) * kernel.multiply_adds_per_step();
  return cache[args] = peak_gops_of(kernel, threads, iterations, macs);
}

double amx_bf16_peak_gflops(int threads, std::int64_t iterations, std::string* why) {
  const CpuInfo& cpu = cpu_info();
  if (!cpu.amx_usable || !cpu.isa.amx_bf16) {
    if (why)
      *why = !cpu.amx_usable ? "AMX is not usable natively: " + cpu.amx_reason
                             : std::string("the CPU has no AMX-BF16 (tdpbf16ps)");
    return 0;
  }
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const AmxPeakKernel kernel(AmxPeakKind::bf16);
  const double macs = double(AmxPeakKernel::kTileProducts) * double(iterations) *
                      AmxPeakKernel::multiply_adds_per_product(AmxPeakKind::bf16);
  return cache[args] = peak_gops_of(kernel, threads, iterations, macs);
}

std::string dot_peak_instruction() {
  switch (dot_kind()) {
    case DotKind::zmm:
      return "vpdpbusd zmm";
    case DotKind::ymm_vnni:
      return "vpdpbusd ymm (VEX)";
    default:
      return "vpsignb+vpmaddubsw+vpmaddwd+vpaddd ymm (AVX2)";
  }
}

}  // namespace qforge
