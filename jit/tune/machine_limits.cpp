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

namespace qforge {
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

// 12 independent accumulators of the AVX2 u8 x s8 dot sequence the ymm kernels use.
__attribute__((target("avx2"))) std::uint64_t dot_loop_avx2(std::int64_t iterations) {
  __m256i acc[12];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(-5), ones = _mm256_set1_epi16(1);
  const __m256i wabs = _mm256_abs_epi8(w);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) {
      const __m256i t = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(x, w));
      a = _mm256_add_epi32(a, _mm256_madd_epi16(t, ones));
    }
  std::uint64_t sum = 0;
  for (auto& a : acc) sum += static_cast<std::uint32_t>(_mm256_extract_epi32(a, 0));
  return sum;
}

__attribute__((target("avx512f,avx512vnni"))) std::uint64_t dot_loop_zmm(std::int64_t iterations) {
  __m512i acc[12];
  for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm512_dpbusd_epi32(a, x, w);
  std::uint64_t sum = 0;
  for (auto& a : acc) {
    std::uint32_t lanes[16];
    _mm512_storeu_si512(lanes, a);
    sum += lanes[0];
  }
  return sum;
}

__attribute__((target("avx2,avxvnni"))) std::uint64_t dot_loop_ymm_vnni(std::int64_t iterations) {
  __m256i acc[12];
  for (auto& a : acc) a = _mm256_setzero_si256();
  const __m256i w = _mm256_set1_epi8(3), x = _mm256_set1_epi8(5);
  for (std::int64_t i = 0; i < iterations; ++i)
    for (auto& a : acc) a = _mm256_dpbusd_avx_epi32(a, x, w);
  std::uint64_t sum = 0;
  for (auto& a : acc) sum += static_cast<std::uint32_t>(_mm256_extract_epi32(a, 0));
  return sum;
}

enum class DotKind { zmm, ymm_vnni, avx2 };

DotKind dot_kind() {
  const IsaFlags& f = cpu_info().isa;
  if (f.avx512_vnni) return DotKind::zmm;
  if (f.avx_vnni) return DotKind::ymm_vnni;
  return DotKind::avx2;
}

}  // namespace

double read_bandwidth_gbps(int threads, std::size_t bytes_per_thread) {
  static std::map<std::pair<int, std::size_t>, double> cache;
  const std::pair<int, std::size_t> args{threads, bytes_per_thread};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const std::size_t per_thread = bytes_per_thread / 128 * 128;  // whole read_stream steps
  AlignedBuffer<std::uint8_t> buffer(per_thread * threads);
  std::memset(buffer.data(), 1, buffer.size());  // fault every page in first
  std::vector<std::uint64_t> sink(threads);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s = run_threads_seconds(threads, [&](int t) {
      sink[t] += read_stream(buffer.data() + t * per_thread, per_thread);
    });
    best = std::max(best, double(per_thread) * threads / s / 1e9);
  }
  return cache[args] = best;
}

double dot_peak_gops(int threads, std::int64_t iterations) {
  static std::map<std::pair<int, std::int64_t>, double> cache;
  const std::pair<int, std::int64_t> args{threads, iterations};
  if (auto it = cache.find(args); it != cache.end()) return it->second;
  const DotKind kind = dot_kind();
  // multiply-adds per accumulator step: 64 (zmm) or 32 (ymm)
  const double macs = 12.0 * iterations * (kind == DotKind::zmm ? 64 : 32);
  std::vector<std::uint64_t> sink(threads);
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const double s = run_threads_seconds(threads, [&](int t) {
      sink[t] += kind == DotKind::zmm        ? dot_loop_zmm(iterations)
                 : kind == DotKind::ymm_vnni ? dot_loop_ymm_vnni(iterations)
                                             : dot_loop_avx2(iterations);
    });
    best = std::max(best, 2 * macs * threads / s / 1e9);
  }
  return cache[args] = best;
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
