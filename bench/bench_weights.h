// What the layer benchmarks share for timing weights that stream from memory: how many
// copies of a layer's packed weights a call rotates through so that decode-sized calls
// (M <= 4) read cold weights (cold_weight_copies), and a copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "jit/cpu/cpu_info.h"
#include "jit/tune/machine_limits.h"
#include "ops/quant/pack.h"

namespace qforge::bench {

inline int rotation_copies(std::int64_t m, std::int64_t bytes) {
  if (m > 4) return 1;
  return cold_weight_copies(bytes);
}

inline PackedWeights copy_of(const PackedWeights& p) {
  PackedWeights out;
  out.header = p.header;
  out.geometry = p.geometry;
  out.data.resize(p.data.size());
  std::memcpy(out.data.data(), p.data.data(), p.data.size());
  return out;
}

}  // namespace qforge::bench
