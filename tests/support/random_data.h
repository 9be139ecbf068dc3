// Random test data with a fixed, printed seed per test so failures reproduce.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace qforge::test {

inline std::vector<float> random_floats(std::size_t count, std::uint64_t seed, float stddev = 1.f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.f, stddev);
  std::vector<float> v(count);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<float> random_uniform(std::size_t count, std::uint64_t seed, float lo,
                                         float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace qforge::test
