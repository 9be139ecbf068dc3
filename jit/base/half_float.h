// IEEE binary16 (f16) and bfloat16 (bf16) conversions, bit-exact and without FPU tricks.
//
//   f32  : s | eeeeeeee        | mmmmmmmmmmmmmmmmmmmmmmm   (bias 127)
//   f16  : s | eeeee           | mmmmmmmmmm                (bias 15)
//   bf16 : s | eeeeeeee        | mmmmmmm                   (the top half of an f32)
//
// Narrowing conversions round to nearest, ties to even; NaN stays NaN (the payload's top
// bits are kept, so every f16 survives f16 -> f32 -> f16), values beyond the f16 range
// become infinity.
#pragma once

#include <bit>
#include <cstdint>

namespace qforge {

inline constexpr float kLargestF16 = 65504.f;  // the largest finite f16

constexpr float f16_to_f32(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

constexpr std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;

  if (magnitude > 0x7f800000u) {  // NaN: keep the top 10 payload bits, never let them be 0
    const std::uint32_t payload = (magnitude >> 13) & 0x3ffu;
    return static_cast<std::uint16_t>(sign | 0x7c00u | (payload ? payload : 0x200u));
  }
  // 65520 (0x477ff000) lies halfway between the largest f16 (65504) and 2^16; ties go to
  // the even neighbour, which is infinity.
  if (magnitude >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);

  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 113) {
    // Result is an f16 subnormal (or zero): count units of 2^-24.
    // value = m * 2^(exponent - 150) with the implicit bit in m, so units = m >> (126 - exponent).
    if (exponent < 102) return static_cast<std::uint16_t>(sign);  // below 2^-25: rounds to 0
    const std::uint32_t m = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126 - exponent;  // 14..24
    std::uint32_t units = m >> shift;
    const std::uint32_t rest = m & ((1u << shift) - 1);
    const std::uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (units & 1u))) ++units;
    return static_cast<std::uint16_t>(sign | units);
  }

  std::uint32_t half = ((exponent - (127 - 15)) << 10) | ((magnitude >> 13) & 0x3ffu);
  const std::uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into exponent
  return static_cast<std::uint16_t>(sign | half);
}

constexpr float bf16_to_f32(std::uint16_t bf16) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bf16) << 16);
}

constexpr std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

}  // namespace qforge
