// The tuner's search space, owned here beside the generator's register budget so no
// other part of qforge decides which blockings exist:
//
//   MR        1 .. max_tile_rows(bucket)      (m1: 1, ms: 4, ml: 8)
//   NR        1 .. kMaxTileUnits              (16-column units per tile)
//   K unroll  kUnrollChoices                  (64-byte packed rows per loop iteration)
//   prefetch  kPrefetchChoices                (bytes ahead in each panel stream, 0 = none)
//
// filtered by fits(): a blocking that exceeds the register budget is never proposed.
// AMX keys have one blocking (the tile plan's), so their space is just the default.
#pragma once

#include <array>
#include <vector>

#include "jit/gemm/gemm_key.h"

namespace qforge {

inline constexpr int kMaxTileUnits = 8;
inline constexpr std::array<int, 4> kUnrollChoices = {1, 2, 4, 8};
inline constexpr std::array<int, 4> kPrefetchChoices = {0, 512, 1024, 2048};

// Rows worth holding in one register tile for an M bucket (more rows than M never run).
int max_tile_rows(MBucket bucket);
// The tile rows a key's blockings may have: 1 .. max_tile_rows(bucket), or exactly D for
// a split key (its tile holds one row's D digit rows).
struct TileRows {
  int min = 1, max = 1;
};
TileRows tile_rows_of(const GemmKey& key);

// Every blocking of the space that fits `key` (its own blocking field is ignored), the
// analytic default first, then the rest ordered by how many fields differ from it.
std::vector<Blocking> blocking_candidates(const GemmKey& key);

}  // namespace qforge
