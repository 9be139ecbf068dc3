#include "ops/tune/tuner.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <unordered_set>

#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "jit/gemm/amx_generator.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"
#include "jit/gemm/tile_streaming.h"
#include "ops/linear/quantized_linear.h"
#include "ops/linear/thread_pool.h"
#include "ops/tune/blocking_search.h"
#include "ops/tune/call_policy_search.h"
#include "ops/tune/kernel_bench.h"

namespace qforge {
namespace {

struct Task {
  GemmKey shape;  // bucket set, default blocking
  std::vector<std::int64_t> ms;
};

// Distinct shapes x buckets, decode first (M = 1), then GEMM (M >= 5), then M = 2..4. A
// split key (one row's digit rows, only ever called for M = 1) is one task of its own, in
// the bucket gemm_key_for gives it, after the decode tasks.
std::vector<Task> plan_tasks(std::span<const GemmKey> keys, std::span<const std::int64_t> ms) {
  std::vector<GemmKey> shapes, split_shapes;
  std::unordered_set<TuningKey, TuningKeyHash> seen;
  for (GemmKey key : keys) {
    if (key.split_digits() != 0) {
      if (seen.insert(tuning_key_of(key, 1)).second) split_shapes.push_back(key);
      continue;
    }
    key.bucket = MBucket::one;
    if (seen.insert(tuning_key_of(key, 1)).second) shapes.push_back(key);
  }
  std::vector<Task> tasks;
  for (GemmKey shape : split_shapes) {
    shape.blocking = default_blocking(shape);
    tasks.push_back({shape, {1}});
  }
  for (MBucket bucket : {MBucket::one, MBucket::large, MBucket::small}) {
    std::vector<std::int64_t> in_bucket;
    for (std::int64_t m : ms)
      if (m >= 1 && bucket_of(m) == bucket &&
          std::find(in_bucket.begin(), in_bucket.end(), m) == in_bucket.end())
        in_bucket.push_back(m);
    if (in_bucket.empty()) continue;
    for (GemmKey shape : shapes) {
      shape.bucket = bucket;
      // The chains are the M = 1 weight-only key's (the CPU's rule), not the other buckets'.
      shape.woq_chains = weight_only_gemv_chains(cpu_info(), shape);
      shape.blocking = default_blocking(shape);
      tasks.push_back({shape, in_bucket});
    }
  }
  return tasks;
}

double seconds_between(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The task's entry in the database and its rows in the report.
void add_result(const Task& task, const SearchResult& found, std::int64_t weight_bytes,
                const TunerOptions& options, TuningDb& db, TuneReport& report) {
  TunedKernel entry;
  entry.blocking = found.best;
  entry.default_us = found.default_us.front();
  entry.tuned_us = found.best_us.front();
  db.set(tuning_key_of(task.shape, options.threads), entry);
  ++report.tuned;
  for (std::size_t i = 0; i < task.ms.size(); ++i) {
    TunedMeasurement row;
    row.key = task.shape;
    row.key.blocking = found.best;
    row.default_blocking = found.default_blocking;
    row.m = task.ms[i];
    row.default_us = found.default_us[i];
    row.tuned_us = found.best_us[i];
    row.noise = found.noise;
    row.kept_default = found.kept_default;
    row.weight_bytes = weight_bytes;
    if (row.memory_bound() && options.limits.read_gbps > 0)
      row.fraction = row.gbps(row.tuned_us) / options.limits.read_gbps;
    if (!row.memory_bound() && options.limits.dot_gops > 0)
      row.fraction = row.gops(row.tuned_us) / options.limits.dot_gops;
    report.rows.push_back(row);
  }
}

// Large-M task: units or rows, with the blocking just kept (needs two threads and at
// least as many rows as threads at every M). Timed on cold weight copies: a rows split
// streams all of a layer's weights on every thread, which warm weights would hide.
void tune_thread_split(const Task& task, const Blocking& kept, ThreadPool& pool,
                       SteadyClock::time_point deadline, TuningDb& db, TuneReport& report) {
  const int threads = pool.size();
  if (threads < 2) return;
  for (std::int64_t m : task.ms)
    if (m < threads) return;
  GemmKey key = task.shape;
  key.blocking = kept;
  KernelBench bench(task.shape, task.ms, pool, KernelBench::Weights::cold);
  const GemmGenerator code(key);
  const SplitChoice choice = choose_thread_split(code, bench, deadline);
  if (!choice.finished) {
    report.notes.push_back(kernel_name(key) + ": the budget ran out before the thread split");
    return;
  }
  const TuningKey tk = tuning_key_of(key, threads);
  TunedKernel entry = *db.find(tk);
  entry.thread_split = choice.split;
  db.set(tk, entry);
  report.policies.push_back({key, task.ms, choice.units_us, choice.rows_us, choice.noise,
                             choice.split == ThreadSplit::rows ? "split rows" : "split units"});
}

// Small-M task: where the GEMM kernel (tuned blocking if the database has one) overtakes
// the GEMV kernel just kept.
void tune_crossover(const Task& task, const Blocking& kept, ThreadPool& pool,
                    SteadyClock::time_point deadline, TuningDb& db, TuneReport& report) {
  GemmKey gemv = task.shape;
  gemv.blocking = kept;
  GemmKey gemm = task.shape;
  gemm.bucket = MBucket::large;
  const TunedKernel* gemm_entry = db.find(tuning_key_of(gemm, pool.size()));
  gemm.blocking = gemm_entry ? gemm_entry->blocking : default_blocking(gemm);
  KernelBench bench(task.shape, kCrossoverRows, pool);
  const GemmGenerator gemv_code(gemv), gemm_code(gemm);
  const CrossoverChoice choice =
      find_crossover(gemv_code, gemm_code, bench, deadline, kDefaultGemmMinRows);
  if (!choice.finished) {
    report.notes.push_back(kernel_name(gemv) + ": the budget ran out before the GEMV/GEMM point");
    return;
  }
  const TuningKey tk = tuning_key_of(gemv, pool.size());
  TunedKernel entry = *db.find(tk);
  entry.gemm_min_m = choice.threshold;
  db.set(tk, entry);
  report.policies.push_back({gemv,
                             {kCrossoverRows.begin(), kCrossoverRows.end()},
                             choice.before_us,
                             choice.after_us,
                             choice.noise,
                             "GEMM from M = " + std::to_string(choice.threshold)});
}

// AMX task: where the AMX kernel overtakes the zmm GEMM kernel (tuned blocking if the
// database has one). AMX has a single blocking (its tile plan), so there is nothing else
// to search; the threshold goes on the shape's zmm GEMM entry, where the runs read it.
void tune_amx_threshold(const Task& task, ThreadPool& pool, SteadyClock::time_point deadline,
                        TuningDb& db, TuneReport& report) {
  GemmKey zmm = task.shape;
  zmm.isa = Isa::avx512_vnni;
  zmm.bucket = MBucket::large;
  const TuningKey tk = tuning_key_of(zmm, pool.size());
  TunedKernel entry;
  entry.blocking = default_blocking(zmm);
  if (const TunedKernel* tuned = db.find(tk)) entry = *tuned;
  zmm.blocking = entry.blocking;
  KernelBench bench(task.shape, kAmxCrossoverRows, pool);
  const GemmGenerator zmm_code(zmm);
  const AmxGenerator amx_code(task.shape);
  const CrossoverChoice choice =
      find_crossover(zmm_code, amx_code, bench, deadline, kDefaultAmxMinRows);
  if (!choice.finished) {
    report.notes.push_back(kernel_name(task.shape) + ": the budget ran out before the AMX point");
    return;
  }
  entry.amx_min_m = choice.threshold;
  db.set(tk, entry);
  ++report.tuned;
  report.policies.push_back({task.shape,
                             {kAmxCrossoverRows.begin(), kAmxCrossoverRows.end()},
                             choice.before_us,
                             choice.after_us,
                             choice.noise,
                             "AMX from M = " + std::to_string(choice.threshold)});
}

}  // namespace

double TunedMeasurement::operations() const {
  return 2.0 * double(m) * double(key.n) * key.panels_per_unit() * double(key.k);
}

TuneReport tune_kernels(std::span<const GemmKey> model_keys, const TunerOptions& options,
                        TuningDb& db) {
  const auto start = SteadyClock::now();
  const auto end =
      start + std::chrono::duration_cast<SteadyClock::duration>(
                  std::chrono::duration<double>(std::max(0.0, options.budget_seconds)));
  const std::vector<Task> tasks = plan_tasks(model_keys, options.ms);
  TuneReport report;
  report.tasks = tasks.size();
  ThreadPool pool(std::max(1, options.threads));
  const IsaMask native = hardware_isa_mask(cpu_info());

  // Pass 1 gives every task an equal share of what is left; pass 2 gives the time small
  // tasks did not use to those whose share ran out (big GEMMs).
  std::vector<std::size_t> queue(tasks.size());
  for (std::size_t t = 0; t < tasks.size(); ++t) queue[t] = t;
  for (int pass = 0; pass < 2 && !queue.empty(); ++pass) {
    std::vector<std::size_t> ran_out;
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const std::size_t t = queue[q];
      const Task& task = tasks[t];
      const std::string name = kernel_name(task.shape);
      const auto now = SteadyClock::now();
      if (now >= end) {
        ran_out.insert(ran_out.end(), queue.begin() + static_cast<long>(q), queue.end());
        break;
      }
      if (!(native & isa_bit(task.shape.isa)) && !options.allow_emulated) {
        if (pass == 0)
          report.notes.push_back(name + ": " + std::string(isa_name(task.shape.isa)) +
                                 " is not native here (never tuned under emulation)");
        continue;
      }
      // An equal share of what is left, set-up included.
      const auto deadline = now + (end - now) / static_cast<long>(queue.size() - q);
      auto progress = [&] {
        if (!options.on_progress) return;
        options.on_progress({t, tasks.size(), name, seconds_between(start, SteadyClock::now()),
                             options.budget_seconds});
      };
      progress();
      try {
        if (task.shape.isa == Isa::amx) {
          tune_amx_threshold(task, pool, deadline, db, report);
          continue;
        }
        KernelBench bench(task.shape, task.ms, pool);
        const SearchResult found = search_blocking(task.shape, bench, deadline, progress);
        if (!found.finished) {
          ran_out.push_back(t);
          continue;
        }
        add_result(task, found, bench.weight_bytes(), options, db, report);
        if (task.shape.bucket == MBucket::large)
          tune_thread_split(task, found.best, pool, deadline, db, report);
        if (task.shape.bucket == MBucket::small && task.shape.split_digits() == 0)
          tune_crossover(task, found.best, pool, deadline, db, report);
      } catch (const std::exception& e) {
        report.notes.push_back(name + ": skipped (" + e.what() + ")");
      }
    }
    queue = ran_out;
  }
  for (std::size_t t : queue)
    report.notes.push_back(kernel_name(tasks[t].shape) + ": the budget ran out; default kept");
  report.seconds = seconds_between(start, SteadyClock::now());
  return report;
}

}  // namespace qforge
