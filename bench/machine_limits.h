// The machine's own limits, measured in the benchmark process so qforge's figures can
// be reported as ratios: streaming read bandwidth and int8 dot-product peak.
#pragma once

#include <string>

namespace qforge::bench {

// GB/s reading a >= 1 GiB buffer with `threads` threads (cached per thread count).
double read_bandwidth_gbps(int threads);
// Peak u8 x s8 multiply-add throughput in GOPS (2 ops per multiply-add) with `threads`
// threads, using the best dot-product instruction this CPU runs natively (cached).
double dot_peak_gops(int threads);
// "vpdpbusd zmm", "vpdpbusd ymm (VEX)" or "vpmaddubsw+vpmaddwd ymm (AVX2)".
std::string dot_peak_instruction();

}  // namespace qforge::bench
