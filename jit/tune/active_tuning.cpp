#include "jit/tune/active_tuning.h"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include "jit/gemm/register_budget.h"

namespace qforge {
namespace {

struct ActiveTable {
  std::shared_mutex mutex;
  std::atomic<bool> installed{false};
  std::atomic<std::uint64_t> generation{0};
  std::optional<TuningDb> db;
  int threads = 1;
};

ActiveTable& active() {
  static ActiveTable table;
  return table;
}

}  // namespace

void install_tuning(TuningDb db, int threads) {
  ActiveTable& t = active();
  std::unique_lock lock(t.mutex);
  t.db = std::move(db);
  t.threads = threads;
  t.installed.store(true, std::memory_order_release);
  t.generation.fetch_add(1, std::memory_order_release);
}

void clear_tuning() {
  ActiveTable& t = active();
  std::unique_lock lock(t.mutex);
  t.installed.store(false, std::memory_order_release);
  t.db.reset();
  t.generation.fetch_add(1, std::memory_order_release);
}

std::size_t installed_tuning_entries() {
  ActiveTable& t = active();
  std::shared_lock lock(t.mutex);
  return t.db ? t.db->size() : 0;
}

std::uint64_t tuning_generation() {
  return active().generation.load(std::memory_order_acquire);
}

std::optional<Blocking> tuned_blocking(const GemmKey& key, int threads) {
  ActiveTable& t = active();
  if (!t.installed.load(std::memory_order_acquire)) return std::nullopt;
  std::shared_lock lock(t.mutex);
  if (!t.db) return std::nullopt;
  const TunedKernel* tuned = t.db->find(tuning_key_of(key, threads));
  // Entries were checked against the register budget when added; a key that differs
  // only in what fits() reads cannot exist, but the generator asserts it, so check.
  if (tuned == nullptr || !fits(key, tuned->blocking)) return std::nullopt;
  return tuned->blocking;
}

std::optional<Blocking> tuned_blocking(const GemmKey& key) {
  ActiveTable& t = active();
  if (!t.installed.load(std::memory_order_acquire)) return std::nullopt;
  int threads = 0;
  {
    std::shared_lock lock(t.mutex);
    threads = t.threads;
  }
  return tuned_blocking(key, threads);
}

namespace {

// The installed entry for `key` with its bucket replaced, copied out under the lock.
std::optional<TunedKernel> installed_entry(GemmKey key, MBucket bucket) {
  ActiveTable& t = active();
  if (!t.installed.load(std::memory_order_acquire)) return std::nullopt;
  std::shared_lock lock(t.mutex);
  if (!t.db) return std::nullopt;
  key.bucket = bucket;
  const TunedKernel* tuned = t.db->find(tuning_key_of(key, t.threads));
  if (tuned == nullptr) return std::nullopt;
  return *tuned;
}

}  // namespace

std::optional<int> tuned_gemm_min_rows(const GemmKey& key) {
  const std::optional<TunedKernel> entry = installed_entry(key, MBucket::small);
  return entry ? entry->gemm_min_m : std::nullopt;
}

std::optional<ThreadSplit> tuned_thread_split(const GemmKey& key) {
  const std::optional<TunedKernel> entry = installed_entry(key, MBucket::large);
  return entry ? entry->thread_split : std::nullopt;
}

TunedCount count_tuned(std::span<const GemmKey> keys) {
  std::unordered_set<TuningKey, TuningKeyHash> all, tuned;
  for (const GemmKey& key : keys) {
    const TuningKey shape = tuning_key_of(key, 0);
    if (all.insert(shape).second && tuned_blocking(key)) tuned.insert(shape);
  }
  return {tuned.size(), all.size()};
}

}  // namespace qforge
