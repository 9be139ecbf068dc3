// f16 / bf16 conversions against the compiler's own _Float16 and hand-picked boundary cases.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "jit/base/half_float.h"

namespace qforge {
namespace {

std::uint16_t compiler_f16_bits(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  return std::bit_cast<std::uint16_t>(half);
}

float compiler_f16_value(std::uint16_t bits) {
  return static_cast<float>(std::bit_cast<_Float16>(bits));
}

TEST(HalfFloat, EveryF16RoundTripsThroughF32) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float widened = f16_to_f32(half);
    ASSERT_EQ(f32_to_f16(widened), half) << "f16 bits 0x" << std::hex << bits;
    if (!std::isnan(widened)) {
      ASSERT_EQ(std::bit_cast<std::uint32_t>(widened),
                std::bit_cast<std::uint32_t>(compiler_f16_value(half)))
          << "f16 bits 0x" << std::hex << bits;
    }
  }
}

TEST(HalfFloat, KnownF16Values) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(f16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_EQ(std::bit_cast<std::uint32_t>(f16_to_f32(0x8000)), 0x80000000u);  // -0
}

TEST(HalfFloat, F32ToF16RoundsToNearestEven) {
  const float one = 1.0f;
  EXPECT_EQ(f32_to_f16(one + std::ldexp(1.0f, -11)), 0x3c00);      // halfway, even is down
  EXPECT_EQ(f32_to_f16(one + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // halfway, even is up
  EXPECT_EQ(f32_to_f16(one + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // halfway to 2^16 rounds to even: infinity
  EXPECT_EQ(f32_to_f16(-1e9f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie to 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25) * 1.0000001f), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);                      // tie to even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // carries
  const std::uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x7f800001u)), 0x7e00);  // payload lost: still NaN
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0xff802000u)), 0xfc01);  // payload kept
}

TEST(HalfFloat, F32ToF16MatchesCompilerOnRandomBitPatterns) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2'000'000; ++i) {
    const float value = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(value)) continue;
    ASSERT_EQ(f32_to_f16(value), compiler_f16_bits(value))
        << "f32 bits 0x" << std::hex << std::bit_cast<std::uint32_t>(value);
  }
  // Dense sweep over the f16 range, where rounding decisions happen.
  for (std::uint32_t bits = 0x33000000u; bits < 0x47800000u; bits += 97) {
    const float value = std::bit_cast<float>(bits);
    ASSERT_EQ(f32_to_f16(value), compiler_f16_bits(value)) << "f32 bits 0x" << std::hex << bits;
    ASSERT_EQ(f32_to_f16(-value), compiler_f16_bits(-value)) << "f32 bits -0x" << std::hex << bits;
  }
}

TEST(HalfFloat, Bf16) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc040), -3.0f);
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float widened = bf16_to_f32(static_cast<std::uint16_t>(bits));
    if (std::isnan(widened)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(widened))));
    } else {
      ASSERT_EQ(f32_to_bf16(widened), bits);
    }
  }
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
}

}  // namespace
}  // namespace qforge
