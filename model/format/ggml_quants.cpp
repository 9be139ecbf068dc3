#include "model/format/ggml_quants.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/cpu/cpu_info.h"
#include "model/format/ggml_kquants.h"

namespace qforge {

namespace {

static_assert(kQ8_0BlockBytes == 34 && kQ4_0BlockBytes == 18 && kQ4_1BlockBytes == 20);

// f16 -> f32 with F16C, 8 values per instruction: the same IEEE conversion as
// f16_to_f32 (exact; a signalling NaN comes back quieted).
__attribute__((target("avx2,f16c"))) void f16_row_to_f32_f16c(const std::byte* in, float* out,
                                                              std::size_t count) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(
        out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i))));
  for (; i < count; ++i) {
    std::uint16_t half;
    std::memcpy(&half, in + 2 * i, 2);
    out[i] = f16_to_f32(half);
  }
}

bool has_f16c() {
  static const bool has = cpu_info().isa.f16c && cpu_info().isa.avx2 && cpu_info().isa.os_ymm;
  return has;
}

std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t value;
  std::memcpy(&value, p, sizeof(value));
  return value;
}

void store_u16(std::byte* p, std::uint16_t value) {
  std::memcpy(p, &value, sizeof(value));
}

// Truncates toward zero like ggml's (int8_t) casts, clamped to [low, high]; NaN becomes low.
int truncate_clamped(float value, int low, int high) {
  if (!(value >= static_cast<float>(low))) return low;
  if (value >= static_cast<float>(high)) return high;
  return static_cast<int>(value);
}

int round_clamped(float value, int low, int high) {
  if (std::isnan(value)) return 0;
  return static_cast<int>(
      std::clamp(std::round(value), static_cast<float>(low), static_cast<float>(high)));
}

void dequantize_q8_0(const std::byte* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  for (std::size_t i = 0; i < 32; ++i)
    out[i] = d * static_cast<float>(static_cast<std::int8_t>(block[2 + i]));
}

void dequantize_q4_0(const std::byte* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  for (std::size_t j = 0; j < 16; ++j) {
    const auto byte = static_cast<std::uint8_t>(block[2 + j]);
    out[j] = d * static_cast<float>((byte & 0x0f) - 8);
    out[j + 16] = d * static_cast<float>((byte >> 4) - 8);
  }
}

void dequantize_q4_1(const std::byte* block, float* out) {
  const float d = f16_to_f32(load_u16(block));
  const float m = f16_to_f32(load_u16(block + 2));
  for (std::size_t j = 0; j < 16; ++j) {
    const auto byte = static_cast<std::uint8_t>(block[4 + j]);
    out[j] = d * static_cast<float>(byte & 0x0f) + m;
    out[j + 16] = d * static_cast<float>(byte >> 4) + m;
  }
}

void quantize_q8_0(const float* values, std::byte* block) {
  float max_abs = 0.0f;
  for (std::size_t i = 0; i < 32; ++i) max_abs = std::max(max_abs, std::fabs(values[i]));
  const float d = max_abs / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, f32_to_f16(d));
  for (std::size_t i = 0; i < 32; ++i)
    block[2 + i] = static_cast<std::byte>(
        static_cast<std::int8_t>(round_clamped(values[i] * inverse, -127, 127)));
}

// The 32 values of a Q4 / Q5 block (q in 0..15 or 0..31) as the block's bytes from `at`:
// Q5 puts the fifth bits first (u32 qh, bit i of value i), then both put the nibbles
// (byte j = q[j] & 15 | (q[j + 16] & 15) << 4).
void store_values(const int* q, bool five_bits, std::byte* at) {
  if (five_bits) {
    std::uint32_t qh = 0;
    for (std::uint32_t i = 0; i < 32; ++i) qh |= static_cast<std::uint32_t>(q[i] >> 4 & 1) << i;
    std::memcpy(at, &qh, 4);
    at += 4;
  }
  for (std::size_t j = 0; j < 16; ++j)
    at[j] = static_cast<std::byte>((q[j] & 15) | (q[j + 16] & 15) << 4);
}

// Q4_0 scales by the value of largest magnitude, keeping its sign: d = max / -8, so that
// value lands exactly on nibble 0 and the other end keeps one more step (nibble 15 = +7d);
// Q5_0 likewise with d = max / -16 and q in 0..31.
void quantize_q4_0(const float* values, std::byte* block, bool five_bits = false) {
  float max_abs = 0.0f;
  float extreme = 0.0f;
  for (std::size_t i = 0; i < 32; ++i) {
    if (max_abs < std::fabs(values[i])) {
      max_abs = std::fabs(values[i]);
      extreme = values[i];
    }
  }
  const float half = five_bits ? 16.0f : 8.0f;
  const float d = extreme / -half;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, f32_to_f16(d));
  int q[32];
  for (std::size_t i = 0; i < 32; ++i)
    q[i] = truncate_clamped(values[i] * inverse + half + 0.5f, 0, five_bits ? 31 : 15);
  store_values(q, five_bits, block + 2);
}

// Q4_1 / Q5_1: d = (max - min) / 15 (31), m = min.
void quantize_q4_1(const float* values, std::byte* block, bool five_bits = false) {
  float min = values[0];
  float max = values[0];
  for (std::size_t i = 1; i < 32; ++i) {
    min = std::min(min, values[i]);
    max = std::max(max, values[i]);
  }
  const int top = five_bits ? 31 : 15;
  const float d = (max - min) / static_cast<float>(top);
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(block, f32_to_f16(d));
  store_u16(block + 2, f32_to_f16(min));
  int q[32];
  for (std::size_t i = 0; i < 32; ++i)
    q[i] = truncate_clamped((values[i] - min) * inverse + 0.5f, 0, top);
  store_values(q, five_bits, block + 4);
}

void check_sizes(GgmlType type, std::size_t values, std::size_t bytes, std::string_view what) {
  if (!is_supported(type))
    fail(what, ": type ", ggml_type_name(type),
         " is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q2_K..Q6_K are)");
  const std::uint64_t expected = ggml_row_bytes(type, values);
  if (bytes != expected)
    fail(what, ": ", values, " values of ", ggml_type_name(type), " take ", expected,
         " bytes, but the buffer has ", bytes);
}

}  // namespace

void dequantize_row(GgmlType type, std::span<const std::byte> row, std::span<float> out) {
  check_sizes(type, out.size(), row.size(), "dequantize_row");
  const std::byte* in = row.data();
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out.data(), in, out.size() * sizeof(float));
      return;
    case GgmlType::F16:
      if (has_f16c()) return f16_row_to_f32_f16c(in, out.data(), out.size());
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = f16_to_f32(load_u16(in + 2 * i));
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < out.size(); ++i) out[i] = bf16_to_f32(load_u16(in + 2 * i));
      return;
    case GgmlType::Q8_0:
      for (std::size_t b = 0; b < out.size() / 32; ++b)
        dequantize_q8_0(in + b * kQ8_0BlockBytes, out.data() + b * 32);
      return;
    case GgmlType::Q4_0:
      for (std::size_t b = 0; b < out.size() / 32; ++b)
        dequantize_q4_0(in + b * kQ4_0BlockBytes, out.data() + b * 32);
      return;
    case GgmlType::Q4_1:
      for (std::size_t b = 0; b < out.size() / 32; ++b)
        dequantize_q4_1(in + b * kQ4_1BlockBytes, out.data() + b * 32);
      return;
    default:
      if (is_extra_block_type(type)) {
        const std::uint64_t values = ggml_type_traits(type).block_values;
        const std::uint64_t bytes = ggml_row_bytes(type, values);
        for (std::size_t b = 0; b < out.size() / values; ++b)
          dequantize_extra_block(type, in + b * bytes, out.data() + b * values);
        return;
      }
      break;
  }
  fail("dequantize_row: type ", ggml_type_name(type), " is not supported");
}

void quantize_row(GgmlType type, std::span<const float> values, std::span<std::byte> out) {
  check_sizes(type, values.size(), out.size(), "quantize_row");
  std::byte* dst = out.data();
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, values.data(), values.size() * sizeof(float));
      return;
    case GgmlType::F16:
      for (std::size_t i = 0; i < values.size(); ++i) store_u16(dst + 2 * i, f32_to_f16(values[i]));
      return;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < values.size(); ++i)
        store_u16(dst + 2 * i, f32_to_bf16(values[i]));
      return;
    case GgmlType::Q8_0:
      for (std::size_t b = 0; b < values.size() / 32; ++b)
        quantize_q8_0(values.data() + b * 32, dst + b * kQ8_0BlockBytes);
      return;
    case GgmlType::Q4_0:
      for (std::size_t b = 0; b < values.size() / 32; ++b)
        quantize_q4_0(values.data() + b * 32, dst + b * kQ4_0BlockBytes);
      return;
    case GgmlType::Q4_1:
      for (std::size_t b = 0; b < values.size() / 32; ++b)
        quantize_q4_1(values.data() + b * 32, dst + b * kQ4_1BlockBytes);
      return;
    case GgmlType::Q5_0:
      for (std::size_t b = 0; b < values.size() / 32; ++b)
        quantize_q4_0(values.data() + b * 32, dst + b * kQ5_0BlockBytes, true);
      return;
    case GgmlType::Q5_1:
      for (std::size_t b = 0; b < values.size() / 32; ++b)
        quantize_q4_1(values.data() + b * 32, dst + b * kQ5_1BlockBytes, true);
      return;
    default:
      break;
  }
  fail("quantize_row: type ", ggml_type_name(type), " is not supported");
}

}  // namespace qforge
