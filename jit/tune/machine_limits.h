// The machine's own limits, measured in the process that reports against them (the
// benchmarks, `qforge tune`), so kernel figures can be stated as ratios: streaming read
// bandwidth, the int8 dot-product peak and the floating-point (FMA, bf16) peaks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace qforge {

// Weight copies a decode benchmark rotates through span this many L3 sizes: CPUID's L3 is
// per CCX, and a guest's vCPUs may sit on several, so twice the reported size can still be
// served from cache (measured: 2x gave M = 1 times 2.5-4.6x too fast on a KVM EPYC guest).
inline constexpr double kColdWeightsL3Multiple = 8;
// ... but never more than this: some guests report the whole socket's L3 (508 MiB on a
// 2-vCPU EPYC guest whose vCPUs sit on 32 MiB CCXs), and 4 GiB of copies per benchmarked
// shape cost more time than the tuner's budget. 1 GiB is still twice the largest L3 a
// socket has (504 MiB).
inline constexpr std::int64_t kColdWeightsMaxBytes = std::int64_t{1} << 30;
// The tuner ranks blockings rather than stating bandwidth ratios, and sets up a rotation per
// shape within a few seconds' budget: it spans at most this (8x a 32 MiB CCX's L3, 2.4x
// a 105 MiB Xeon L3).
inline constexpr std::int64_t kTunerColdWeightsMaxBytes = std::int64_t{256} << 20;
// How many copies of `bytes` of weights a decode-sized call rotates through so that each
// call reads its weights from memory: min(kColdWeightsL3Multiple x L3, max_bytes) of them,
// plus two.
int cold_weight_copies(std::int64_t bytes, std::int64_t max_bytes = kColdWeightsMaxBytes);

// The two read patterns the bandwidth is the better of, over [p, p + bytes) (p 32-byte
// aligned, bytes a multiple of 128): one sequential stream, and the region's quarters as
// four concurrent streams, each prefetched 1 KiB ahead (a GEMV's access pattern over
// several panels). They return a sum of what they read, so the reads cannot be dropped.
std::uint64_t read_stream(const std::uint8_t* p, std::size_t bytes);
std::uint64_t read_four_streams(const std::uint8_t* p, std::size_t bytes);

// GB/s reading `bytes_per_thread` per thread (far beyond the caches) with `threads`
// threads: the best of one sequential stream and four prefetched streams per thread, three
// times each; cached per (threads, bytes).
double read_bandwidth_gbps(int threads, std::size_t bytes_per_thread = std::size_t{1} << 30);
// The same measurement taken afresh on every call, for a limit sampled next to what it
// judges on a host whose bandwidth drifts (qforge bench samples it before and after each
// precision's run).
double sample_read_bandwidth_gbps(int threads, std::size_t bytes_per_thread = std::size_t{1} << 30);
// Peak u8 x s8 multiply-add throughput in GOPS (2 ops per multiply-add) with `threads`
// threads, using the best dot-product instruction this CPU runs natively, in a generated
// loop (dot_peak_kernel.h); each thread runs `iterations` steps of every accumulator
// (cached per arguments).
double dot_peak_gops(int threads, std::int64_t iterations = 20'000'000);
// "vpdpbusd zmm", "vpdpbusd ymm (VEX)" or "vpsignb+vpmaddubsw+vpmaddwd+vpaddd ymm (AVX2)".
std::string dot_peak_instruction();
// Peak tdpbsud throughput in GOPS (2 ops per multiply-add) with `threads` threads, in a
// generated loop of four independent tile products (amx_peak_kernel.h); 0 when this CPU
// does not run AMX natively, with the reason in *why (cached per arguments).
double amx_peak_gops(int threads, std::int64_t iterations = 2'000'000, std::string* why = nullptr);

// Peak f32 multiply-add throughput in GFLOPS (2 per multiply-add), the weight-only
// kernels' limit: vfmadd231ps on zmm where AVX-512 runs natively, else on ymm
// (float_peak_kernel.h; cached per arguments).
double fma_peak_gflops(int threads, std::int64_t iterations = 10'000'000);
std::string fma_peak_instruction();  // "vfmadd231ps zmm" | "vfmadd231ps ymm"
// Peak vdpbf16ps zmm throughput in GFLOPS; 0 when the CPU does not run AVX512-BF16
// natively, with the reason in *why.
double bf16_peak_gflops(int threads, std::int64_t iterations = 5'000'000,
                        std::string* why = nullptr);
// Peak tdpbf16ps throughput in GFLOPS (amx_peak_kernel.h); 0 without native AMX-BF16,
// with the reason in *why.
double amx_bf16_peak_gflops(int threads, std::int64_t iterations = 2'000'000,
                            std::string* why = nullptr);

}  // namespace qforge
