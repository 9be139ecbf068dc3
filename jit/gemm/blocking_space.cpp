#include "jit/gemm/blocking_space.h"

#include <algorithm>

#include "jit/gemm/register_budget.h"

namespace qforge {

int max_tile_rows(MBucket bucket) {
  switch (bucket) {
    case MBucket::one:
      return 1;
    case MBucket::small:
      return 4;
    case MBucket::large:
      return 8;
  }
  return 1;
}

TileRows tile_rows_of(const GemmKey& key) {
  if (const int digits = key.split_digits()) return {digits, digits};
  return {1, max_tile_rows(key.bucket)};
}

namespace {

int fields_differing(const Blocking& a, const Blocking& b) {
  return (a.mr != b.mr) + (a.nr != b.nr) + (a.k_unroll != b.k_unroll) +
         (a.prefetch_distance != b.prefetch_distance);
}

}  // namespace

std::vector<Blocking> blocking_candidates(const GemmKey& key) {
  const Blocking base = default_blocking(key);
  if (key.isa == Isa::amx) return {base};  // tiles are fixed by the AMX tile plan
  std::vector<Blocking> out;
  const TileRows rows = tile_rows_of(key);
  for (int mr = rows.min; mr <= rows.max; ++mr)
    for (int nr = 1; nr <= kMaxTileUnits; ++nr)
      for (int unroll : kUnrollChoices)
        for (int prefetch : kPrefetchChoices) {
          const Blocking b{mr, nr, unroll, prefetch};
          if (fits(key, b) && !(b == base)) out.push_back(b);
        }
  std::stable_sort(out.begin(), out.end(), [&](const Blocking& a, const Blocking& b) {
    return fields_differing(a, base) < fields_differing(b, base);
  });
  if (fits(key, base)) out.insert(out.begin(), base);
  return out;
}

}  // namespace qforge
