// Random test data with a fixed, printed seed per test so failures reproduce.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "jit/base/half_float.h"
#include "ops/quant/quantize.h"

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

// Random N x K weights (seed) quantized under `scheme`; with `float_offsets` each group's
// zero point is replaced by a random float minimum in [-15 s, 0], as a Q4_1 block has.
inline QuantizedTensor random_quantized(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                        std::uint64_t seed, bool float_offsets) {
  const auto w = random_floats(std::size_t(n * k), seed, 0.05f);
  QuantizedTensor t = quantize_reference(w.data(), n, k, scheme);
  if (!float_offsets) return t;
  const auto unit = random_uniform(t.scales.size(), seed + 11, -15.f, 0.f);
  t.offsets.resize(t.scales.size());
  for (std::size_t i = 0; i < t.offsets.size(); ++i) {
    t.offsets[i] = f16_to_f32(f32_to_f16(unit[i] * t.scales[i]));  // f16, as GGUF's minima
    t.zero_points[i] = 0;
  }
  return t;
}

}  // namespace qforge::test
