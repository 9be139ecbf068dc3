// The AMX kernel's tile plan: which tmm holds what, how M is cut into row blocks, and
// the 64-byte tile configurations (palette 1) the kernel loads.
//
//   one block = R rows (R <= 32) x 2 packed panels (32 output columns), K in steps of 64:
//
//                          B tmm6: panel 0        B tmm7: panel 1     16 quads x 64 bytes (u8)
//   A tmm4: rows 0..15     C tmm0                 C tmm1              int32, 16 columns each
//   A tmm5: rows 16..R-1   C tmm2                 C tmm3              (only when R > 16)
//
//   A rows are 64 bytes of xq (s8) at k .. k+63; B row q is packed row q of the step
//   (16 columns x 4 k of u8 operands, the VNNI-4 order), so
//   tdpbsud C[m][n] += sum_k xq[m][k] * operand[n][k]  (then C -= bias * xsum per group).
//
// bf16 weight-only kernels (int4, AMX-BF16) use the same tiles with other element types:
//
//   A rows are 64 bytes of bf16 x at k .. k+31, the a_bf16 pairs (woq_fields.h); B row p
//   holds, for each of 16 columns, the pair of bf16(operand - bias) that A's dword p
//   multiplies (one packed int4 row gives 4 B rows, its 4 pairs), so
//   tdpbf16ps C[m][n] += x[m][2p] w[n][2p] + x[m][2p+1] w[n][2p+1]   (f32)
//   one step takes 32 k with the full-tile configuration (A R x 64 bytes, B 16 x 64).
//
// M is cut into ceil(M / 32) blocks of R = ceil(M / blocks) rows. The last block starts at
// M - R, overlapping the one before it by fewer than `blocks` rows (recomputed, not stored
// again), so a single configuration, picked by R, serves every block of a call.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "jit/gemm/gemm_key.h"

namespace qforge {

inline constexpr int kAmxTileRows = 16;     // rows of a full tile
inline constexpr int kAmxTileBytes = 64;    // bytes per tile row (colsb)
inline constexpr int kAmxTileK = 64;        // k per full tile step (one A row, 16 B rows)
inline constexpr int kAmxHalfTileK = 32;    // the step of groups that are odd multiples of 32
inline constexpr int kAmxBlockRows = 32;    // two row tiles
inline constexpr int kAmxBlockPanels = 2;   // two column tiles
inline constexpr int kAmxConfigBytes = 64;  // ldtilecfg / sttilecfg operand
inline constexpr std::uint8_t kAmxPalette = 1;

constexpr int amx_c_tile(int row_tile, int panel) {
  return 2 * row_tile + panel;
}
constexpr int amx_a_tile(int row_tile) {
  return 4 + row_tile;
}
constexpr int amx_b_tile(int panel) {
  return 6 + panel;
}

// The AMX kernel's fixed blocking: 32 rows x 2 panels (2 units, or 1 SwiGLU pair), one
// step of amx_step_k(g) k per iteration.
Blocking amx_blocking(const GemmKey& key);

// The k a tile step takes for groups of g: 64 (A rows of 64 bytes, B tiles of 16 quad
// rows), or 32 for g an odd multiple of 32 (g32, g96: A rows of 32 bytes, B tiles of 8
// quad rows), so a step never straddles two groups; 0 when g is no multiple of 32.
//
//   g % 64 == 0:  A tmm4/5  R x 64 bytes     B tmm6/7  16 rows x 64 bytes
//   g % 64 == 32: A tmm4/5  R x 32 bytes     B tmm6/7   8 rows x 64 bytes
int amx_step_k(std::int64_t group);

// The k a bf16 step takes (kAmxBf16StepK: 32 bf16 per A row) when g is a multiple of
// it, else 0; and the A row bytes of the key's steps, which pick its tile configuration.
inline constexpr int kAmxBf16StepK = 32;
int amx_step_k(const GemmKey& key);
int amx_step_bytes(const GemmKey& key);

// Rows per block R for a call with M rows (1..32; 0 for M <= 0).
int amx_block_rows(std::int64_t m);

using AmxTileConfig = std::array<std::uint8_t, kAmxConfigBytes>;

// The configuration for blocks of R rows (1..32) and A rows of step_bytes (64 or 32;
// s8 kernels: the step's k):
//   byte 0 palette, 16 + 2t colsb[t] (u16), 48 + t rows[t]; tiles a block does not use
//   (row tile 1 when R <= 16) are left unconfigured (0 x 0).
AmxTileConfig amx_tile_config(int block_rows, int step_bytes = kAmxTileK);

// "palette 1; tmm0 C 16 rows x 64 colsb; ...; tmm7 B 16 rows x 64 colsb" (unused tiles
// say so).
std::string describe_tile_config(const AmxTileConfig& config);

}  // namespace qforge
