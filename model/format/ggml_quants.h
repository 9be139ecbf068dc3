// Reference conversion between float rows and the ggml storage formats qforge reads.
// Rows are runs of values along dims[0]; quantized rows are whole blocks.
//
//   Q8_0 block, 34 bytes for 32 values:       w[i] = d * q[i]
//     +0  f16  d
//     +2  i8   q[32]
//
//   Q4_0 block, 18 bytes for 32 values:       w[i] = d * (nibble[i] - 8)
//     +0  f16  d
//     +2  u8   qs[16]   byte j = nibble[j] | nibble[j + 16] << 4
//
//   Q4_1 block, 20 bytes for 32 values:       w[i] = d * nibble[i] + m
//     +0  f16  d
//     +2  f16  m
//     +4  u8   qs[16]   same nibble order as Q4_0
//
// Quantization follows ggml's reference code (quantize_row_*_ref), so the bytes match
// files written by llama.cpp for the same floats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "model/format/gguf_types.h"

namespace qforge {

inline constexpr std::size_t kQuantBlockValues = 32;
inline constexpr std::size_t kQ8_0BlockBytes = 2 + 32;
inline constexpr std::size_t kQ4_0BlockBytes = 2 + 16;
inline constexpr std::size_t kQ4_1BlockBytes = 2 + 2 + 16;
inline constexpr std::size_t kQ5_0BlockBytes = 2 + 4 + 16;  // + u32 qh (ggml_kquants.h)
inline constexpr std::size_t kQ5_1BlockBytes = 2 + 2 + 4 + 16;

// Decodes `out.size()` values from `row` (which must hold exactly that many values of
// `type`). Works for F32, F16, BF16, Q8_0, Q4_0 and Q4_1; other types throw.
void dequantize_row(GgmlType type, std::span<const std::byte> row, std::span<float> out);

// Encodes `values` into `out` (exactly ggml_row_bytes(type, values.size()) bytes) for
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 (ggml's reference rounding); other
// types throw.
void quantize_row(GgmlType type, std::span<const float> values, std::span<std::byte> out);

}  // namespace qforge
