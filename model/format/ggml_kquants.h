// Decoding of the ggml block types beyond Q8_0 / Q4_0 / Q4_1, exactly as ggml defines
// them (ggml-quants.c dequantize_row_*), so a K-quant GGUF (Q4_K_M, Q5_K_M, Q6_K, ...)
// loads: its tensors decode to the file's floats and are quantized from them like F16.
//
//   Q5_0   22 B / 32:  f16 d, u32 qh, u8 qs[16]      w = d * ((nibble | hbit << 4) - 16)
//   Q5_1   24 B / 32:  f16 d, f16 m, u32 qh, qs[16]  w = d * (nibble | hbit << 4) + m
//          nibble j = qs[j] & 15, j + 16 = qs[j] >> 4; hbit i = qh >> i & 1
//
// K-quants: super-blocks of 256 values.
//   Q2_K   84 B:  u8 scales[16] (lo 4 bits scale, hi 4 min), u8 qs[64], f16 d, f16 dmin
//                 16 sub-blocks of 16: w = d * sc * q - dmin * m,  q in 0..3
//   Q3_K  110 B:  u8 hmask[32], u8 qs[64], u8 scales[12] (16 x 6 bits), f16 d
//                 16 sub-blocks of 16: w = d * (sc - 32) * (q - (hbit ? 0 : 4)), q 2 bits
//   Q4_K  144 B:  f16 d, f16 dmin, u8 scales[12] (8 scales, 8 mins, 6 bits), u8 qs[128]
//                 8 sub-blocks of 32: w = d * sc * q - dmin * m,  q in 0..15
//   Q5_K  176 B:  f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]
//                 8 sub-blocks of 32: as Q4_K with q in 0..31 (the fifth bit from qh)
//   Q6_K  210 B:  u8 ql[128], u8 qh[64], i8 scales[16], f16 d
//                 16 sub-blocks of 16: w = d * sc * (q - 32),  q in 0..63
// The bit positions inside each 128-value half are drawn beside each decoder.
#pragma once

#include <cstddef>

#include "model/format/gguf_types.h"

namespace qforge {

inline constexpr std::size_t kSuperBlockValues = 256;

// Whether `type` is one of the types above.
bool is_extra_block_type(GgmlType type);

// Decodes one block of `type` (32 or 256 values) into `out`.
void dequantize_extra_block(GgmlType type, const std::byte* block, float* out);

}  // namespace qforge
