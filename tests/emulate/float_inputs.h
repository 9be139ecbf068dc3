// Float test inputs and the IEEE-754 facts the references need (NaN propagation, DAZ).
#pragma once

#include <cfenv>
#include <cstdint>
#include <cstring>

#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {

inline std::uint32_t bits(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
inline float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}
inline bool is_nan(float x) {
  return (bits(x) & 0x7FFFFFFFu) > 0x7F800000u;
}
inline float quiet(float x) {
  return from_bits(bits(x) | 0x00400000u);
}
inline bool is_denormal(float x) {
  return (bits(x) & 0x7F800000u) == 0 && (bits(x) & 0x007FFFFFu) != 0;
}
inline float flush_denormal(float x) {
  return is_denormal(x) ? from_bits(bits(x) & 0x80000000u) : x;
}

// A special value: NaNs (quiet, signaling, with payloads), infinities, zeros, denormals.
inline float special_float(Random& random) {
  const std::uint32_t payload = static_cast<std::uint32_t>(random.next()) & 0x003FFFFFu;
  switch (random.next() % 8) {
    case 0:
      return from_bits(0x7FC00000u | payload);
    case 1:
      return from_bits(0xFF800000u | (payload ? payload : 1));  // signaling
    case 2:
      return from_bits(0x7F800000u);
    case 3:
      return from_bits(0xFF800000u);
    case 4:
      return 0.0f;
    case 5:
      return -0.0f;
    case 6:
      return from_bits(payload | 1);
    default:
      return from_bits(0x80000000u | payload | 1);
  }
}

// Random floats in every register; one element in 8 replaced by a special value.
inline Inputs float_inputs(Random& random, bool specials = true) {
  Inputs in{random.floats(), random.floats(), random.floats(), 0};
  if (specials)
    for (Vec512* v : {&in.dst, &in.src1, &in.src2})
      for (unsigned i = 0; i < 16; ++i)
        if (random.next() % 8 == 0) v->set<float>(i, special_float(random));
  return in;
}

// Sets the thread's MXCSR rounding (FE_TONEAREST, ...) for a scope.
class ScopedRounding {
 public:
  explicit ScopedRounding(int mode) : saved_(std::fegetround()) { std::fesetround(mode); }
  ~ScopedRounding() { std::fesetround(saved_); }
  ScopedRounding(const ScopedRounding&) = delete;
  ScopedRounding& operator=(const ScopedRounding&) = delete;

 private:
  int saved_;
};

}  // namespace qforge::emulate::test
