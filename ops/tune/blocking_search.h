// The search for one task (one shape x one M bucket) on a prepared KernelBench: default,
// tiles, streaming parameters, confirmation (see tuner.h for the order and the rules).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "ops/tune/kernel_bench.h"

namespace qforge {

using SteadyClock = std::chrono::steady_clock;

struct SearchResult {
  bool finished = false;  // the search and the confirmation completed before the deadline
  Blocking default_blocking;
  Blocking best;  // = default_blocking when kept
  bool kept_default = true;
  std::vector<double> default_us;  // per M of the bench, confirmation medians
  std::vector<double> best_us;
  double noise = 0;
  int timings = 0;  // sample sets taken (all candidates)
};

// `shape` carries the bucket; `on_step` is called after each candidate is timed.
SearchResult search_blocking(const GemmKey& shape, KernelBench& bench,
                             SteadyClock::time_point deadline,
                             const std::function<void()>& on_step);

}  // namespace qforge
