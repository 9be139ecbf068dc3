// The process-wide tuning table the call sites read (ops/linear's gemm_key_for):
//
//   install_tuning(db, threads)  ->  tuned_blocking(key) = db[key, threads] or nothing
//
// A process runs its layers with one thread count, so the table is installed for that
// count. Install it before layers are built: their kernels are generated at load time
// from the keys gemm_key_for returns then. Lookups are lock-free while nothing is
// installed and take a shared lock otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "jit/gemm/gemm_key.h"
#include "jit/tune/tuning_db.h"

namespace qforge {

void install_tuning(TuningDb db, int threads);
void clear_tuning();
// Entries of the installed table (0 when none is installed).
std::size_t installed_tuning_entries();
// Changes whenever a table is installed or cleared: call sites that keep what they
// resolved from the table check it to know when to resolve again.
std::uint64_t tuning_generation();

// The tuned blocking for `key` (its own blocking is ignored) on `threads` threads, or
// nothing when the installed table has no entry for it.
std::optional<Blocking> tuned_blocking(const GemmKey& key, int threads);
// The same for the thread count the table was installed for.
std::optional<Blocking> tuned_blocking(const GemmKey& key);

// How calls of `key`'s shape (its bucket and blocking are ignored) are made, as tuned
// for the installed thread count: the M from which they run the GEMM kernel (from the
// shape's "ms" entry) and how large-M calls are split (its "ml" entry); nothing when the
// table has no such value.
std::optional<int> tuned_gemm_min_rows(const GemmKey& key);
std::optional<ThreadSplit> tuned_thread_split(const GemmKey& key);

struct TunedCount {
  std::size_t tuned = 0;  // distinct kernels with an entry
  std::size_t total = 0;  // distinct kernels (blocking ignored)
};
// How many of a model's kernels (e.g. LlamaWeights::warmup_keys()) the table covers.
TunedCount count_tuned(std::span<const GemmKey> keys);

}  // namespace qforge
