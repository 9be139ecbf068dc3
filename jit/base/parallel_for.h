// parallel_for for load-time work (packing, quantization): splits [0, count) into
// contiguous chunks over `threads` std::threads. Not for the per-token hot path (that
// uses the persistent pool in ops/linear). Exceptions from any chunk are rethrown; a chunk
// whose thread cannot be started runs on the calling thread.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace qforge {

// The stack a new thread gets: glibc sizes it from RLIMIT_STACK (8 MiB when unlimited).
inline std::size_t thread_stack_bytes() {
  rlimit stack{};
  if (::getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY)
    return static_cast<std::size_t>(stack.rlim_cur);
  return std::size_t{8} << 20;
}

inline int default_load_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

template <typename Body>  // Body(std::int64_t begin, std::int64_t end)
void parallel_for(std::int64_t count, int threads, Body&& body) {
  threads =
      static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(count, 1)));
  if (threads == 1) {
    body(std::int64_t{0}, count);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto run = [&](std::int64_t begin, std::int64_t end) {
    try {
      body(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    const std::int64_t begin = count * t / threads, end = count * (t + 1) / threads;
    try {
      workers.emplace_back(run, begin, end);
    } catch (const std::system_error&) {
      run(begin, end);  // no thread to be had (a memory or thread limit): this one does it
    }
  }
  for (auto& w : workers) w.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace qforge
