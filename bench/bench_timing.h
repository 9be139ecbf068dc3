// What the benchmarks that time their own turns share: a steady clock and the median of
// the times taken.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace qforge::bench {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace qforge::bench
