// The tuner: for every distinct kernel shape a model calls and every M bucket asked for,
// time the blockings of the generator's search space (jit/gemm/blocking_space.h) on this
// machine and keep the fastest, within a time budget.
//
//   per task (shape x bucket; the bucket's M values are measured together)
//     set up      random weights packed for the shape; for M <= 4 rotating copies over
//                 8 x L3, at most 256 MiB (kTunerColdWeightsMaxBytes)
//     default     warm-up, then median of repeats; its spread is the first noise estimate
//     tiles       MR x NR with the default's K unroll and prefetch      \  successive halving:
//     streaming   the best tile with every K unroll x prefetch          /  3, 6, 12... samples,
//                                                                         losers > 1.2x dropped
//     confirm     default and best interleaved; the best is kept only if it beats the
//                 default by more than the noise (spread, and drift between its runs)
//     calls       large-M task: split by units or by rows (on cold weight copies); small-M
//                 task: the M from which the GEMM kernel beats the GEMV kernel; AMX task
//                 (no blocking to search): the M from which AMX beats the zmm GEMM
//                 (call_policy_search.h)
//
// Tasks run in decode-first order (M = 1, then GEMM, then 2..4), each with an equal share
// of what is left of the budget; tasks whose share ran out (big GEMMs) get a second pass
// with the time the others left unused. Kernels run natively only: a key whose ISA this CPU
// lacks (the emulator's) is skipped.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "jit/tune/tuning_db.h"

namespace qforge {

struct MachineLimits {
  double read_gbps = 0;  // streaming read bandwidth, same thread count (0: unknown)
  double dot_gops = 0;   // int8 dot-product peak, same thread count (0: unknown)
};

struct TunerProgress {
  std::size_t task = 0, tasks = 0;  // task being measured (0-based) of how many
  std::string kernel;               // its name with the default blocking
  double elapsed_seconds = 0, budget_seconds = 0;
};

struct TunerOptions {
  int threads = 1;
  double budget_seconds = 60;
  std::vector<std::int64_t> ms = {1, 4, 128};
  MachineLimits limits;
  std::function<void(const TunerProgress&)> on_progress;  // may be empty
  // Tests only: also run keys whose ISA this CPU lacks (through the instruction emulator,
  // which must be installed); their timings then say nothing about any CPU.
  bool allow_emulated = false;
};

// One kernel at one M, as the report shows it.
struct TunedMeasurement {
  GemmKey key;  // blocking = the one kept (the default when nothing beat it)
  Blocking default_blocking;
  std::int64_t m = 1;
  double default_us = 0;
  double tuned_us = 0;  // = default_us when the default was kept
  double noise = 0;     // relative difference a candidate had to beat
  bool kept_default = true;
  std::int64_t weight_bytes = 0;  // packed bytes one call reads
  double fraction = 0;            // of read bandwidth (M <= 4) or of dot peak (M > 4); 0: unknown

  bool memory_bound() const { return m <= 4; }
  double speedup() const { return tuned_us > 0 ? default_us / tuned_us : 0; }
  double operations() const;  // 2 M N K (both halves of a SwiGLU pair)
  double gbps(double us) const { return double(weight_bytes) / us / 1e3; }
  double gops(double us) const { return operations() / us / 1e3; }
};

// A call-policy measurement (call_policy_search.h), as the report shows it.
struct CallPolicyMeasurement {
  GemmKey key;                    // the task's kernel (bucket ms: crossover, ml: split)
  std::vector<std::int64_t> ms;   // rows measured
  std::vector<double> first_us;   // units split, the GEMV kernel, or the zmm GEMM
  std::vector<double> second_us;  // rows split, the GEMM kernel, or the AMX kernel
  double noise = 0;
  std::string decision;  // "split units" | "split rows" | "GEMM from M = 6" | "AMX from M = 32"
};

struct TuneReport {
  std::vector<TunedMeasurement> rows;
  std::vector<CallPolicyMeasurement> policies;
  std::vector<std::string> notes;  // what was skipped and why
  std::size_t tasks = 0;           // shape x bucket pairs asked for
  std::size_t tuned = 0;           // of which written to the database
  double seconds = 0;
};

// Tunes the distinct shapes of `model_keys` (their bucket and blocking are ignored) for
// the buckets of options.ms and adds an entry per finished task to `db`.
TuneReport tune_kernels(std::span<const GemmKey> model_keys, const TunerOptions& options,
                        TuningDb& db);

}  // namespace qforge
