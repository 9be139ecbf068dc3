// The one packed weight layout every kernel (ymm, zmm, AMX, reference) reads.
//
// W is N x K (out x in). K is zero-padded to Kp (a multiple of the group g; per-channel
// and per-tensor use one group of Kp = K rounded up to 64). N is padded to Np (multiple
// of 16). The buffer is a sequence of panels of 16 output columns; each panel is one
// contiguous stream of groups; each group is its quads followed by its trailer:
//
//   panel p (columns 16p .. 16p+15):
//     group 0: row 0 | row 1 | ... | row R-1 | scales[16] f16 | (offsets[16] f16)
//     group 1: ...
//
//   int8 row r (64 bytes) = quad r of the group, VNNI-4 order:
//     byte 4*c + i = operand(column 16p + c, k = j*g + 4r + i)      c = 0..15, i = 0..3
//   int4 row r (64 bytes) = quads 2r and 2r+1 of the group:
//     byte 4*c + i = nibble(c, j*g + 8r + i) | nibble(c, j*g + 8r + 4 + i) << 4
//   int5: per 32 k (a chunk of 5 rows, 320 bytes), the 4 int4 rows of the operands' low
//   4 bits, then one row of their fifth bits (GGUF's Q5 types keep the same plane):
//     bit (2r + h) * 64 + b of the bit row = bit 4 of the operand whose nibble is byte b of
//     nibble row r, low (h = 0) or high (h = 1) nibble; as qwords: qword 2r + h masks the
//     64 operand bytes of that nibble half (a kmovq), its dwords their two ymm halves
//
// One int8 row feeds one zmm vpdpbusd (two ymm ones); 16 rows are one AMX B tile (8 rows
// one K = 32 tile). A trailer is 32 bytes (64 asymmetric), so groups start 32-byte
// aligned and a group costs what a GGUF block does: int8 g32 34 bytes per 32 weights
// (Q8_0), int4 g32 18 (Q4_0), int4 g32 asymmetric 20 (Q4_1); bits/8 + 2/g per weight.
//
// The weight is the unsigned operand, so no weight-side compensation is stored:
//
//   scheme      stored q     operand u8     v = operand - bias   weight w
//   int8 sym    [-128,127]   q + 128        q          (bias 128) s * v
//   int8 asym   [0,255]      q              q - 128    (bias 128) s * v + offset
//   int4 sym    [-8,7]       q + 8 (nib)    q          (bias 8)   s * v
//   int4 asym   [0,15]       q (nibble)     q          (bias 0)   s * v + offset
//   int5 sym    [-16,15]     q + 16         q          (bias 16)  s * v
//   int5 asym   [0,31]       q              q          (bias 0)   s * v + offset
//
// Activations are signed: xq in [-127, 127]. Per group j and column n every kernel forms
// the same exact integer and the same float sums:
//     C   = sum_k xq[k] * v[k]                            (int32)
//     y  += float(C) * scale[n][j]  (+ float(xsum[m][j]) * offset[n][j])
//     finally y *= a[m]  (the activation's row scale)
// where xsum = sum_k xq[k] over the group (computed when the activation is quantized).
// vpdpbusd / tdpbsud multiply the u8 operand by the s8 activation:
//     acc = sum_k operand[k] * xq[k] = C + bias * xsum   ->   C = acc - bias * xsum
// a correction of the activation alone; the AVX2 kernels flip int8 operands to v itself
// (operand ^ 0x80) and keep their exact signed sequence. |acc| <= 255 * 127 * g < 2^31
// for g <= 65536 (kMaxGroup).
//
// Scales and offsets are IEEE f16, as GGUF's block scales are. qforge's own schemes round
// the scale to f16 once and quantize against the rounded scale; an integer zero point z
// gives offset = f16(s * (128 - z)) (int8) or f16(-s * z) (int4); GGUF Q4_1
// (w = d * n + m) gives scale d and offset m exactly, with the nibble n as the operand.
//
// Two-level scales (a scheme with a super-block of S groups, GGUF's K-quants): the
// group's scale and offset are small integers times f16 values shared by its super-block,
// as the file holds them (Q4_K: w = d * sc * q - dmin * m per 32 weights, d and dmin per
// 256). Each super-block of a panel starts with a header; the trailers hold the integers:
//
//   panel p:  super-block 0: header | group 0 | ... | group S-1
//             super-block 1: header | group S | ...
//   header   (32 bytes, 64 asymmetric): super_scale[16] f16 | (super_offset[16] f16)
//   trailer  (32 bytes):                sub_scale[16] s8    | sub_offset[16] s8 (asym)
//   scale  = float(sub_scale) * super_scale     offset = float(sub_offset) * super_offset
//
// Both products are exact in f32 (an 11-bit f16 significand times a 7-bit integer), so
// the kernels form exactly the scale and offset of the one-level form; Kp is a multiple
// of the super-block. Bytes: int4 g32 asym S 8 (Q4_K) 0.578 per weight (the file: 0.5625),
// int8 g16 sym S 16 (Q6_K) 1.133 (0.820).
//
// int5 g32 costs 0.6875 bytes per weight (Q5_0: the same), asymmetric 0.75 (Q5_1: the
// same); two-level g32 S 8 (Q5_K) 0.703 (the file: 0.6875).
//
// Interleaved pairs (SwiGLU): panel 2p holds gate columns 16p.., panel 2p+1 the up
// columns 16p..; the kernel emits silu(gate) * up for the N outputs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/quant/scheme.h"

namespace qforge {

inline constexpr int kPanelWidth = 16;        // output columns per panel
inline constexpr int kQuadK = 4;              // k per VNNI quad
inline constexpr int kRowBytes = 64;          // one packed row = 16 columns x 4 bytes
inline constexpr int kPerChannelKAlign = 64;  // per-channel Kp: multiple of 64 (AMX K tile)
inline constexpr std::uint32_t kPackedMagic = 0x4b504651;  // "QFPK"
// 3: f16 scales and offsets, unsigned weight operands, no compensation sums.
inline constexpr std::uint16_t kPackedLayoutVersion = 3;

// Byte offsets inside a group's trailer (16 f16 values each).
inline constexpr int kTrailerScales = 0;
inline constexpr int kTrailerOffset = 32;  // asymmetric only
inline constexpr int kTrailerBytesSymmetric = 32;
inline constexpr int kTrailerBytesAsymmetric = 64;
// Two-level scales: the trailer's s8 integers and the super-block header's f16 values.
inline constexpr int kTrailerSubScales = 0;
inline constexpr int kTrailerSubOffsets = 16;
inline constexpr int kTrailerBytesTwoLevel = 32;
inline constexpr int kSuperScales = 0;
inline constexpr int kSuperOffsets = 32;  // asymmetric only
inline constexpr int kSuperHeaderBytesSymmetric = 32;
inline constexpr int kSuperHeaderBytesAsymmetric = 64;

// The bias of the operand encoding (v = operand - bias, table above).
constexpr int operand_bias(int bits, bool asymmetric) {
  return bits == 8 ? 128 : (asymmetric ? 0 : 1 << (bits - 1));
}
// Packed data bytes per k of a 16-column panel (int8 16, int5 10, int4 8).
constexpr int panel_bytes_per_k(int bits) {
  return 2 * bits;
}

// Self-describing header: everything needed to walk the buffer. 64 bytes, stored
// beside the data (and first in a serialized blob).
struct PackedHeader {
  std::uint32_t magic = kPackedMagic;
  std::uint16_t version = kPackedLayoutVersion;
  std::uint8_t bits = 8;
  std::uint8_t asymmetric = 0;
  std::uint8_t granularity = 0;  // Granularity
  std::uint8_t interleaved_pair = 0;
  std::uint16_t superblock_groups = 0;  // S of two-level scales; 0: one-level
  std::int64_t n = 0;                   // output columns (per half for an interleaved pair)
  std::int64_t k = 0;                   // input length
  std::int64_t group = 0;               // effective g (Kp for per-channel / per-tensor)
  std::int64_t n_padded = 0;            // Np: 16 * panels (both halves for a pair)
  std::int64_t k_padded = 0;            // Kp
  std::int64_t total_bytes = 0;         // data bytes after the header
};
static_assert(sizeof(PackedHeader) == 64, "PackedHeader must stay one cache line");

// Size arithmetic derived from a header. Group and panel sizes are multiples of 32 bytes;
// the buffer is 64-byte aligned.
struct PackedGeometry {
  std::int64_t panels = 0;
  std::int64_t groups = 0;          // groups per panel = Kp / g
  std::int64_t rows_per_group = 0;  // 64-byte rows of quantized data per group
  std::int64_t group_data_bytes = 0;
  std::int64_t trailer_bytes = 0;       // 32 sym, 64 asym (32 two-level)
  std::int64_t group_bytes = 0;         // data + trailer
  std::int64_t superblock_groups = 0;   // S (0: one-level scales, no headers)
  std::int64_t super_header_bytes = 0;  // 32 sym, 64 asym (0 one-level)
  std::int64_t panel_bytes = 0;
  std::int64_t total_bytes = 0;

  // Byte offsets of group j and of super-block b's header from the start of a panel.
  std::int64_t group_offset(std::int64_t j) const {
    return j * group_bytes +
           (superblock_groups ? (j / superblock_groups + 1) : 0) * super_header_bytes;
  }
  std::int64_t super_header_offset(std::int64_t b) const {
    return b * (superblock_groups * group_bytes + super_header_bytes);
  }
};

// Builds the header for N x K under `scheme` (validates; throws qforge::Error).
PackedHeader make_packed_header(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                bool interleaved_pair = false);
PackedGeometry geometry_of(const PackedHeader& header);
QuantScheme scheme_of(const PackedHeader& header);
// Checks magic, version and internal consistency (e.g. of a header read from a file).
void validate(const PackedHeader& header, const char* what = "packed weights");

}  // namespace qforge
