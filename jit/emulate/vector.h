// A 512-bit vector value, the unit every emulated vector instruction reads and writes,
// and the integer helpers (saturation, sign extension) the SDM pseudo-code uses.
//
//   Vec.bytes:  [ 0 ..15 | 16..31 | 32..47 | 48..63 ]
//                 xmm      ymm hi    zmm bits 511:256
//   element i of width T sits at bytes [i*sizeof(T), (i+1)*sizeof(T)), little-endian.
//
// Elements are read and written through memcpy, so any T (int8 .. double) views the same
// bytes without aliasing questions. Vec is a trivial type: thread-local arrays of it need
// no constructor.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace qforge::emulate {

inline constexpr unsigned kVectorBytes = 64;

struct alignas(64) Vec {
  std::uint8_t bytes[kVectorBytes];

  template <typename T>
  T get(unsigned index) const {
    T value;
    std::memcpy(&value, bytes + index * sizeof(T), sizeof(T));
    return value;
  }
  template <typename T>
  void set(unsigned index, T value) {
    std::memcpy(bytes + index * sizeof(T), &value, sizeof(T));
  }
};

inline Vec zero_vector() {
  Vec v;
  std::memset(v.bytes, 0, sizeof v.bytes);
  return v;
}

// Clamps a wide signed value into the range of To (signed or unsigned).
template <typename To>
To saturate(std::int64_t value) {
  constexpr std::int64_t lo = static_cast<std::int64_t>(std::numeric_limits<To>::min());
  constexpr std::int64_t hi = static_cast<std::int64_t>(std::numeric_limits<To>::max());
  return static_cast<To>(value < lo ? lo : (value > hi ? hi : value));
}

// Clamps an unsigned value into the range of the unsigned To.
template <typename To>
To saturate_unsigned(std::uint64_t value) {
  constexpr std::uint64_t hi = std::numeric_limits<To>::max();
  return static_cast<To>(value > hi ? hi : value);
}

template <typename T>
using Unsigned = std::make_unsigned_t<T>;
template <typename T>
using Signed = std::make_signed_t<T>;

}  // namespace qforge::emulate
