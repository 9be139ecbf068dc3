// Q8_0 / Q4_0 / Q4_1 blocks: byte layout computed by hand, dequantized values, and the
// quantization error bound against float reference values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "jit/base/half_float.h"
#include "model/format/ggml_quants.h"
#include "tests/model/model_test_util.h"

namespace qforge {
namespace {

std::vector<std::byte> quantize(GgmlType type, const std::vector<float>& values) {
  std::vector<std::byte> out(ggml_row_bytes(type, values.size()));
  quantize_row(type, values, out);
  return out;
}

std::vector<float> dequantize(GgmlType type, const std::vector<std::byte>& row, std::size_t n) {
  std::vector<float> out(n);
  dequantize_row(type, row, out);
  return out;
}

std::uint16_t u16_at(const std::vector<std::byte>& bytes, std::size_t offset) {
  std::uint16_t value;
  std::memcpy(&value, bytes.data() + offset, 2);
  return value;
}

TEST(GgmlTypes, BlockSizesMatchGgml) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, 64), 256u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F16, 64), 128u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::BF16, 64), 128u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q8_0, 64), 68u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_1, 64), 40u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 256), 144u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 512), 420u);
  EXPECT_EQ(ggml_type_name(GgmlType::BF16), "BF16");
  EXPECT_EQ(find_ggml_type(4), nullptr);  // retired Q4_2
  EXPECT_EQ(find_ggml_type(99), nullptr);
  EXPECT_TRUE(is_supported(GgmlType::Q4_1));
  EXPECT_TRUE(is_supported(GgmlType::Q4_K));
  EXPECT_FALSE(is_supported(GgmlType::IQ4_XS));
  test::expect_error([] { ggml_row_bytes(GgmlType::Q8_0, 33); }, {"33", "Q8_0"});
}

TEST(Q8_0, BlockLayoutByHand) {
  // Values k/4 for k = -127..(-127+31): max |w| = 127/4, so d = 0.25 exactly and q = k.
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i) values[i] = static_cast<float>(-127 + 8 * i) / 4.0f;
  values[31] = 127.0f / 4.0f;  // k = 127 as well
  const std::vector<std::byte> block = quantize(GgmlType::Q8_0, values);
  ASSERT_EQ(block.size(), 34u);
  EXPECT_EQ(u16_at(block, 0), 0x3400);  // f16 0.25
  for (int i = 0; i < 31; ++i)
    EXPECT_EQ(static_cast<std::int8_t>(block[2 + i]), -127 + 8 * i) << "value " << i;
  EXPECT_EQ(static_cast<std::int8_t>(block[33]), 127);
  EXPECT_EQ(dequantize(GgmlType::Q8_0, block, 32), values);
}

TEST(Q4_0, BlockLayoutByHand) {
  // w = 0.5 * (n - 8) with n = i % 16, and the most negative value -4 present: ggml picks
  // d = max / -8 = -4 / -8 = 0.5, so each value lands exactly on nibble n.
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i) values[i] = 0.5f * static_cast<float>((i * 7) % 16 - 8);
  values[5] = -4.0f;  // nibble 0
  const std::vector<std::byte> block = quantize(GgmlType::Q4_0, values);
  ASSERT_EQ(block.size(), 18u);
  EXPECT_EQ(u16_at(block, 0), 0x3800);  // f16 0.5
  for (int j = 0; j < 16; ++j) {
    const int low = static_cast<int>(values[j] * 2.0f) + 8;        // value j
    const int high = static_cast<int>(values[j + 16] * 2.0f) + 8;  // value j + 16
    EXPECT_EQ(static_cast<int>(block[2 + j]), low | (high << 4)) << "byte " << j;
  }
  EXPECT_EQ(dequantize(GgmlType::Q4_0, block, 32), values);
}

TEST(Q4_0, DecodesAHandWrittenBlock) {
  // d = -2 (f16 0xc000); byte j holds nibble j (low) and nibble 15 - j (high).
  std::vector<std::byte> block(18);
  block[0] = std::byte{0x00};
  block[1] = std::byte{0xc0};
  for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<std::byte>(j | ((15 - j) << 4));
  const std::vector<float> values = dequantize(GgmlType::Q4_0, block, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(values[j], -2.0f * static_cast<float>(j - 8));
    EXPECT_EQ(values[j + 16], -2.0f * static_cast<float>(15 - j - 8));
  }
}

TEST(Q4_1, BlockLayoutByHand) {
  // min = -1, max = 6.5: d = 7.5 / 15 = 0.5, m = -1; w = -1 + 0.5 * n exactly.
  std::vector<float> values(32);
  for (int i = 0; i < 32; ++i) values[i] = -1.0f + 0.5f * static_cast<float>((i * 5) % 16);
  const std::vector<std::byte> block = quantize(GgmlType::Q4_1, values);
  ASSERT_EQ(block.size(), 20u);
  EXPECT_EQ(u16_at(block, 0), 0x3800);  // d = 0.5
  EXPECT_EQ(u16_at(block, 2), 0xbc00);  // m = -1
  for (int j = 0; j < 16; ++j) {
    const int low = (j * 5) % 16;
    const int high = ((j + 16) * 5) % 16;
    EXPECT_EQ(static_cast<int>(block[4 + j]), low | (high << 4)) << "byte " << j;
  }
  EXPECT_EQ(dequantize(GgmlType::Q4_1, block, 32), values);
}

// Q5_1 by hand: min = -1, max = 14.5, d = 15.5 / 31 = 0.5; values -1 + 0.5 q, q = 0..31
// in a scrambled order: the nibbles as Q4_1 stores them, then bit i of qh = q[i] >> 4.
TEST(Q5_1, BlockLayoutByHand) {
  std::vector<float> values(32);
  int q[32];
  for (int i = 0; i < 32; ++i) {
    q[i] = (i * 7) % 32;
    values[i] = -1.0f + 0.5f * static_cast<float>(q[i]);
  }
  const std::vector<std::byte> block = quantize(GgmlType::Q5_1, values);
  ASSERT_EQ(block.size(), 24u);
  EXPECT_EQ(u16_at(block, 0), 0x3800);  // d = 0.5
  EXPECT_EQ(u16_at(block, 2), 0xbc00);  // m = -1
  std::uint32_t qh;
  std::memcpy(&qh, block.data() + 4, 4);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(qh >> i & 1, std::uint32_t(q[i] >> 4)) << "value " << i;
  for (int j = 0; j < 16; ++j)
    EXPECT_EQ(static_cast<int>(block[8 + j]), (q[j] & 15) | (q[j + 16] & 15) << 4) << "byte " << j;
  EXPECT_EQ(dequantize(GgmlType::Q5_1, block, 32), values);
}

TEST(Quantize, ErrorBoundOnRandomRows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(32 * 64);
  for (float& v : values) v = normal(rng);
  values[100] = 0.0f;
  for (int i = 32 * 5; i < 32 * 6; ++i) values[i] = 0.0f;  // an all-zero block: d = 0

  for (GgmlType type :
       {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    const std::vector<float> decoded = dequantize(type, quantize(type, values), values.size());
    for (std::size_t block = 0; block < values.size() / 32; ++block) {
      float min = values[block * 32], max = min, max_abs = 0;
      for (int i = 0; i < 32; ++i) {
        const float v = values[block * 32 + i];
        min = std::min(min, v);
        max = std::max(max, v);
        max_abs = std::max(max_abs, std::fabs(v));
      }
      // Rounding to the grid, plus the f16 rounding of d (relative 2^-11) times the largest
      // integer it multiplies, plus (Q4_1) the f16 rounding of m. Q4_0 can be a whole step
      // off: a value of the opposite sign to the extreme maps to nibble 16, clamped to 15.
      const float f16_error = std::ldexp(1.0f, -11);
      float bound = 0;
      if (type == GgmlType::Q8_0) {
        const float d = max_abs / 127.0f;
        bound = 0.5f * d + 127.0f * d * f16_error;
      } else if (type == GgmlType::Q4_0 || type == GgmlType::Q5_0) {
        const float half = type == GgmlType::Q4_0 ? 8.0f : 16.0f;
        const float d = max_abs / half;
        bound = d + half * d * f16_error;
      } else {
        const float top = type == GgmlType::Q4_1 ? 15.0f : 31.0f;
        const float d = (max - min) / top;
        bound = 0.5f * d + top * d * f16_error + std::fabs(min) * f16_error;
      }
      bound += 1e-6f * (max_abs + 1.0f);
      for (int i = 0; i < 32; ++i) {
        const std::size_t k = block * 32 + i;
        ASSERT_LE(std::fabs(decoded[k] - values[k]), bound) << "value " << k;
      }
    }
    for (int i = 32 * 5; i < 32 * 6; ++i) EXPECT_EQ(decoded[i], 0.0f);
  }
}

TEST(Quantize, FloatFormats) {
  const std::vector<float> values = {1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159f, -0.0f};
  const std::vector<float> f16 =
      dequantize(GgmlType::F16, quantize(GgmlType::F16, values), values.size());
  const std::vector<float> bf16 =
      dequantize(GgmlType::BF16, quantize(GgmlType::BF16, values), values.size());
  const std::vector<float> f32 =
      dequantize(GgmlType::F32, quantize(GgmlType::F32, values), values.size());
  EXPECT_EQ(f32, values);
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(f16[i], f16_to_f32(f32_to_f16(values[i])));
    EXPECT_EQ(bf16[i], bf16_to_f32(f32_to_bf16(values[i])));
  }
  EXPECT_EQ(f16[0], 1.0f);
  EXPECT_EQ(f16[1], -2.5f);
  EXPECT_EQ(f16[2], 65504.0f);
  EXPECT_NEAR(bf16[4], 3.14159f, 0.01f);
}

TEST(Quantize, RejectsWrongSizesAndTypes) {
  std::vector<float> values(32);
  std::vector<std::byte> out(33);
  test::expect_error([&] { quantize_row(GgmlType::Q8_0, values, out); }, {"Q8_0", "34", "33"});
  test::expect_error([&] { quantize_row(GgmlType::Q4_K, values, out); }, {"Q4_K"});
  test::expect_error([&] { dequantize_row(GgmlType::Q6_K, out, values); }, {"Q6_K"});
}

}  // namespace
}  // namespace qforge
