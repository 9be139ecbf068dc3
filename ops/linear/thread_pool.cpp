#include "ops/linear/thread_pool.h"

#include <immintrin.h>

#include <system_error>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"

namespace qforge {

namespace {
// Spin this many pauses (a few microseconds) before sleeping on a futex: back-to-back
// calls of a decode step find the workers awake, an idle or oversubscribed machine does
// not burn a core.
constexpr int kSpinIterations = 4000;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) {
    try {
      workers_.emplace_back([this, i] { worker_main(i); });
    } catch (const std::system_error& e) {
      shut_down();
      fail("cannot start thread ", i + 1, " of ", threads, " (", e.what(), "; each needs ",
           thread_stack_bytes() >> 20,
           " MiB of stack); use fewer threads (-t) or raise the process's thread or memory "
           "limit");
    }
  }
}

ThreadPool::~ThreadPool() {
  shut_down();
}

void ThreadPool::shut_down() noexcept {
  stop_.store(true);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

void ThreadPool::run(const std::function<void(int)>& task) {
  if (workers_.empty()) {
    task(0);
    return;
  }
  task_ = &task;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();
  task(0);
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    _mm_pause();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
}

void ThreadPool::worker_main(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    std::uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      _mm_pause();
      now = generation_.load(std::memory_order_acquire);
    }
    while (now == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      now = generation_.load(std::memory_order_acquire);
    }
    seen = now;
    if (stop_.load()) return;
    (*task_)(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace qforge
