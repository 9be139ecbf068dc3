// A persistent pool for the per-token hot path: workers spin briefly, then sleep on a
// futex (std::atomic::wait), and the caller runs task 0 itself, so a call costs about a
// microsecond, not a thread start.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace qforge {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads >= 1 (the caller counts as one)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Runs task(i) for i in [0, size()) and returns when all are done.
  void run(const std::function<void(int)>& task);

 private:
  void worker_main(int index);
  void shut_down() noexcept;  // stops and joins the workers started so far

  std::vector<std::thread> workers_;
  const std::function<void(int)>* task_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace qforge
