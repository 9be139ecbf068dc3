// Two measurements that decide how a shape's calls are made, rather than how its kernel
// is built (the tuner runs them after the blocking search of the task they belong to):
//
//   thread split    (large-M task) the kept kernel split by units and by rows
//                   (ops/linear/call_split.h), in interleaved pairs at each M of the bench;
//                   rows is kept only where it beats units by more than the noise at each M
//   GEMV/GEMM point (small-M task) the GEMV kernel and the GEMM kernel, interleaved, at
//                   M = kCrossoverRows; per M the faster one by more than that M's noise wins
//                   (a tie keeps the default's choice: GEMM from kDefaultGemmMinRows); the
//                   threshold is the smallest measured M from which the GEMM kernel wins at
//                   every larger measured M (one past the last when it never does)
//   AMX point       (AMX task) the zmm GEMM kernel and the AMX kernel at M = kAmxCrossoverRows,
//                   decided the same way (ties: AMX from kDefaultAmxMinRows)
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "jit/gemm/gemm_generator.h"
#include "ops/tune/blocking_search.h"
#include "ops/tune/kernel_bench.h"

namespace qforge {

inline constexpr std::array<std::int64_t, 6> kCrossoverRows = {2, 3, 4, 5, 6, 8};
inline constexpr std::array<std::int64_t, 6> kAmxCrossoverRows = {8, 12, 16, 24, 32, 64};

struct SplitChoice {
  bool finished = false;  // measured before the deadline
  ThreadSplit split = ThreadSplit::units;
  std::vector<double> units_us, rows_us;  // per M of the bench, medians
  double noise = 0;                       // the largest per-M noise (each M is judged by its own)
};
SplitChoice choose_thread_split(const GemmGenerator& kernel, KernelBench& bench,
                                SteadyClock::time_point deadline);

struct CrossoverChoice {
  bool finished = false;
  int threshold = 0;                        // the M from which `after` runs
  std::vector<double> before_us, after_us;  // per M of the bench, medians
  double noise = 0;                         // the largest per-M noise (each M is judged by its own)
};
// `before` serves the smaller M, `after` the larger; ties keep the default threshold's
// choice. Measured at the bench's M values (kCrossoverRows, kAmxCrossoverRows).
CrossoverChoice find_crossover(const GemmGenerator& before, const GemmGenerator& after,
                               KernelBench& bench, SteadyClock::time_point deadline,
                               std::int64_t default_threshold);

}  // namespace qforge
