// The one packed weight layout every kernel (ymm, zmm, AMX, reference) reads.
//
// W is N x K (out x in). K is zero-padded to Kp (a multiple of the group g; per-channel
// and per-tensor use one group of Kp = K rounded up to 64). N is padded to Np (multiple
// of 16). The buffer is a sequence of panels of 16 output columns; each panel is one
// contiguous stream of groups; each group is its quads followed by its trailer:
//
//   panel p (columns 16p .. 16p+15):
//     group 0: row 0 | row 1 | ... | row R-1 | scales[16] f32 | comp[16] i32 | (offset[16] f32)
//     group 1: ...
//
//   int8 row r (64 bytes) = quad r of the group, VNNI-4 order:
//     byte 4*c + i = operand(column 16p + c, k = j*g + 4r + i)      c = 0..15, i = 0..3
//   int4 row r (64 bytes) = quads 2r and 2r+1 of the group:
//     byte 4*c + i = nibble(c, j*g + 8r + i) | nibble(c, j*g + 8r + 4 + i) << 4
//
// One int8 row feeds one zmm vpdpbusd (two ymm ones); 16 rows are one AMX B tile.
//
// Operand encoding (the signed byte the u8 x s8 dot product sees) and its correction.
// Activations arrive as xu = xq + 128 (u8; the AVX2 kernels read xq itself). Per group j
// and column n the kernel forms
//     acc = sum_k xu[k] * operand[k]                    (int32, vpdpbusd / tdpbusd)
//     C   = acc - comp[n] (+ zc * xsum[m][j])            (int32, exact)
//     y  += scale[n][j] * float(C)  (+ offset[n][j] * float(xsum[m][j]))
//     finally y *= a[m]  (the activation's row scale)
// where comp = 128 * sum_k operand[k] and xsum = sum_k xq[k] over the group. The
// weight a column's group stands for is
//
//   scheme      stored q     operand        weight w                  trailer
//   int8 sym    [-127,127]   q              s * operand               scales, comp
//   int8 asym   [0,255]      q - 128        s * operand + offset      scales, comp, offset
//   int4 sym    [-8,7]       q + 8 (nib)    s * (operand - 8)         scales, comp (zc = -8)
//   int4 asym   [0,15]       q (nibble)     s * operand + offset      scales, comp, offset
//
// so sum_k xq * w = s * C + offset * xsum. An integer zero point z gives
// offset = s * (128 - z) (int8) or -s * z (int4); GGUF Q4_1 (w = d * n + m) gives
// scale d and offset m exactly, with the nibble n as the operand.
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
inline constexpr std::uint16_t kPackedLayoutVersion = 2;   // 2: asymmetric offsets are f32

// Byte offsets inside a group's trailer.
inline constexpr int kTrailerScales = 0;
inline constexpr int kTrailerComp = 64;
inline constexpr int kTrailerOffset = 128;  // asymmetric only

// Self-describing header: everything needed to walk the buffer. 64 bytes, stored
// beside the data (and first in a serialized blob).
struct PackedHeader {
  std::uint32_t magic = kPackedMagic;
  std::uint16_t version = kPackedLayoutVersion;
  std::uint8_t bits = 8;
  std::uint8_t asymmetric = 0;
  std::uint8_t granularity = 0;  // Granularity
  std::uint8_t interleaved_pair = 0;
  std::uint16_t reserved0 = 0;
  std::int64_t n = 0;            // output columns (per half for an interleaved pair)
  std::int64_t k = 0;            // input length
  std::int64_t group = 0;        // effective g (Kp for per-channel / per-tensor)
  std::int64_t n_padded = 0;     // Np: 16 * panels (both halves for a pair)
  std::int64_t k_padded = 0;     // Kp
  std::int64_t total_bytes = 0;  // data bytes after the header
};
static_assert(sizeof(PackedHeader) == 64, "PackedHeader must stay one cache line");

// Size arithmetic derived from a header. All sizes are multiples of 64 bytes.
struct PackedGeometry {
  std::int64_t panels = 0;
  std::int64_t groups = 0;          // groups per panel = Kp / g
  std::int64_t rows_per_group = 0;  // 64-byte rows of quantized data per group
  std::int64_t group_data_bytes = 0;
  std::int64_t trailer_bytes = 0;  // 128 sym, 192 asym
  std::int64_t group_bytes = 0;    // data + trailer
  std::int64_t panel_bytes = 0;
  std::int64_t total_bytes = 0;
};

// Builds the header for N x K under `scheme` (validates; throws qforge::Error).
PackedHeader make_packed_header(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                bool interleaved_pair = false);
PackedGeometry geometry_of(const PackedHeader& header);
QuantScheme scheme_of(const PackedHeader& header);
// Checks magic, version and internal consistency (e.g. of a header read from a file).
void validate(const PackedHeader& header, const char* what = "packed weights");

}  // namespace qforge
