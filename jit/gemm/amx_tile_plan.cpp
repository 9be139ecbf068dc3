#include "jit/gemm/amx_tile_plan.h"

#include <algorithm>

#include "jit/base/error.h"

namespace qforge {

Blocking amx_blocking(const GemmKey& key) {
  return Blocking{kAmxBlockRows, kAmxBlockPanels / key.panels_per_unit(), 1, 0};
}

int amx_block_rows(std::int64_t m) {
  if (m <= 0) return 0;
  const std::int64_t blocks = (m + kAmxBlockRows - 1) / kAmxBlockRows;
  return static_cast<int>((m + blocks - 1) / blocks);
}

int amx_step_k(std::int64_t group) {
  if (group % kAmxTileK == 0) return kAmxTileK;
  if (group % kAmxHalfTileK == 0) return kAmxHalfTileK;
  return 0;
}

int amx_step_k(const GemmKey& key) {
  if (key.activation != ActivationKind::bf16) return amx_step_k(key.group);
  return key.group % kAmxBf16StepK == 0 ? kAmxBf16StepK : 0;
}

int amx_step_bytes(const GemmKey& key) {
  return amx_step_k(key) * (key.activation == ActivationKind::bf16 ? 2 : 1);
}

AmxTileConfig amx_tile_config(int block_rows, int step_bytes) {
  QF_REQUIRE(block_rows >= 1 && block_rows <= kAmxBlockRows, "amx: block rows ", block_rows,
             " outside 1..", kAmxBlockRows);
  QF_REQUIRE(step_bytes == kAmxTileK || step_bytes == kAmxHalfTileK, "amx: A rows of ", step_bytes,
             " bytes, not ", kAmxTileK, " or ", kAmxHalfTileK);
  AmxTileConfig config{};
  config[0] = kAmxPalette;
  auto set = [&](int tile, int rows, int colsb) {
    config[16 + 2 * tile] = static_cast<std::uint8_t>(colsb);  // u16, little-endian (high 0)
    config[48 + tile] = static_cast<std::uint8_t>(rows);
  };
  const int row_tiles = block_rows > kAmxTileRows ? 2 : 1;
  for (int i = 0; i < row_tiles; ++i) {
    const int rows = std::min(kAmxTileRows, block_rows - i * kAmxTileRows);
    set(amx_a_tile(i), rows, step_bytes);  // s8 xq or bf16 x
    for (int j = 0; j < kAmxBlockPanels; ++j) set(amx_c_tile(i, j), rows, kAmxTileBytes);
  }
  // B rows: 4 k of u8 or 2 k of bf16 a column
  for (int j = 0; j < kAmxBlockPanels; ++j) set(amx_b_tile(j), step_bytes / 4, kAmxTileBytes);
  return config;
}

std::string describe_tile_config(const AmxTileConfig& config) {
  std::string out = "palette " + std::to_string(config[0]);
  for (int tile = 0; tile < 8; ++tile) {
    const int colsb = config[16 + 2 * tile] | config[17 + 2 * tile] << 8;
    const int rows = config[48 + tile];
    const char* role = tile < 4 ? "C" : tile < 6 ? "A" : "B";
    out += "; tmm" + std::to_string(tile) + " " + role + " ";
    out += rows == 0 ? std::string("unused")
                     : std::to_string(rows) + " rows x " + std::to_string(colsb) + " colsb";
  }
  return out;
}

}  // namespace qforge
