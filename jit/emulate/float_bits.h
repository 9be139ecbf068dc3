// IEEE-754 encodings of float and double, for the cases the SDM defines bit by bit:
// NaN propagation (first NaN source, quieted), DAZ on inputs, QNaN indefinite.
#pragma once

#include <cstdint>
#include <cstring>

namespace qforge::emulate {

template <typename F>
struct FloatTraits;
template <>
struct FloatTraits<float> {
  using Bits = std::uint32_t;
  static constexpr Bits kSign = 0x80000000u, kExponent = 0x7F800000u, kQuiet = 0x00400000u;
  static constexpr Bits kIndefinite = 0xFFC00000u;
};
template <>
struct FloatTraits<double> {
  using Bits = std::uint64_t;
  static constexpr Bits kSign = 0x8000000000000000u, kExponent = 0x7FF0000000000000u;
  static constexpr Bits kQuiet = 0x0008000000000000u, kIndefinite = 0xFFF8000000000000u;
};

template <typename F>
typename FloatTraits<F>::Bits bits_of(F x) {
  typename FloatTraits<F>::Bits b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

template <typename F>
F from_bits(typename FloatTraits<F>::Bits b) {
  F x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

template <typename F>
bool is_nan(F x) {
  using T = FloatTraits<F>;
  return (bits_of(x) & ~T::kSign) > T::kExponent;
}

template <typename F>
bool is_infinite(F x) {
  using T = FloatTraits<F>;
  return (bits_of(x) & ~T::kSign) == T::kExponent;
}

template <typename F>
bool is_denormal(F x) {
  using T = FloatTraits<F>;
  const auto b = bits_of(x);
  return (b & T::kExponent) == 0 && (b & ~(T::kSign | T::kExponent)) != 0;
}

template <typename F>
F quiet(F x) {
  return from_bits<F>(bits_of(x) | FloatTraits<F>::kQuiet);
}

template <typename F>
F indefinite() {
  return from_bits<F>(FloatTraits<F>::kIndefinite);
}

// MXCSR.DAZ: a denormal input reads as zero of the same sign.
template <typename F>
F denormal_as_zero(F x, bool daz) {
  return daz && is_denormal(x) ? from_bits<F>(bits_of(x) & FloatTraits<F>::kSign) : x;
}

}  // namespace qforge::emulate
