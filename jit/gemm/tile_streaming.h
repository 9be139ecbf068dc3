// How the analytic default blocking streams a tile's panels on the CPU at hand (zmm
// kernels). A tile reads NR x P panels side by side (P = 2 for a SwiGLU gate/up pair),
// each with prefetcht0 some bytes ahead; the rule bounds both and sets the distance:
//
//   tile MR x NR, panels p .. p + NR x P - 1 of one call's chunk
//                     units  panels  prefetch
//     decode (M <= 4)
//       general         8       8      1024
//       Zen 4           8       8         0     a GEMV (M = 1): 1 unit, so a thread's
//                                               chunk of adjacent panels is read front to
//                                               back (weight-only: with four chains)
//       Zen 4, split    4       8         0     a split key's D digit rows: 1 unit while
//                                               they hold at most 4 KB (D x Kp bytes),
//                                               else up to 4 units sharing each broadcast
//         int8, no pair 1       8      4096     an int8 split key without a SwiGLU pair:
//                                               1 unit, 64 lines ahead in its stream
//     GEMM (M >= 5)
//       general         4       8         0
//       Zen 4, int4/5   4       2      1024     taller tiles: fewer nibble unpacks per dot
//
// Zen 4 (AMD family 19h with AVX-512; the other family 19h parts have none) was measured on
// a 2-vCPU guest (family 25 model 17), cold weight copies, 2 threads, the blockings in
// turns (docs/PERFORMANCE.md, "Zen 4: decode tiles without software prefetch" and "Zen 4:
// taller int4 GEMM tiles").
//   decode: 1 x 1 without prefetch read int8 2048 x 2048 1.17-1.42x, int8 5632 x 2048 1.21x
//   and int4-g128 1.17x as fast as the general 1 x 8 / 1 x 7 tiles at 1024 bytes, most of
//   it the prefetch (the wide tiles without it: 1.09-1.22x); at M = 4 the int8 4 x 6 tile
//   without prefetch 1.34x, the weight-only int8 GEMV 1.15x, the weight-only bf16 int4 GEMV
//   (compute-bound) the same.
//   GEMM, M = 128: an int4 g32 panel costs 3 unpack ops (and, shift, and) per K step on the
//   pipes the dots use, so rows sharing it pay: 6 x 2 (and 6 x 1 for a SwiGLU pair) with
//   prefetch 1024 ran 1.04-1.07x the 4 x 3 / 5 x 2 defaults (int5 g32 1.07x); int8 and
//   int4-g128 tiles the same within 2%, so they keep the general rule.
// On family 26 (Zen 5) and Sapphire Rapids guests the tuner kept the general default.
//   weight-only GEMV (M = 1), one unit with four accumulator chains against the 8-unit
//   tile, in turns, fast bandwidth state: bf16 int4-g128 59.1 against 47.4 GB/s
//   (5632 x 2048), 55.9 / 46.1 (2048 x 2048), the SwiGLU pair 47.6 / 38.7 (4 units); f32
//   int8 48.6 / 47.6, 46.1 / 48.2, pair 46.7 / 47.5 (compute-bound either way).
//   split keys, cold copies, 2 threads, the kernels in rotating order each turn, fast
//   state (58.6-61.7 GB/s), 1 / 2 / 4 units: int4 (2 digits) 5632 x 2048 0.933 / 0.621 /
//   0.751 of the paired read, its SwiGLU pair 0.907-0.918 / 0.727, 2048 x 5632 (11 KB of
//   digits) 0.716 / 0.772 / 0.863; int8 (3 digits, 6 KB at K 2048) 5632 x 2048 0.845 /
//   0.799 / 0.846, pair 0.787-0.798 / 0.823 / (3 units) 0.839, 2048 x 5632 (17 KB) 0.790 /
//   0.894 / 0.916; the slow state (35-38 GB/s) within 0.03 either way.
//   Two digit rows for int8 (the same harness, 980-2,820 fast turns a shape): 5632 x 2048
//   1 unit 0.935, with prefetch 4096 0.937 (2048: 0.892); 2048 x 5632 4 units 0.916, 1
//   unit 0.884, 1 unit with prefetch 4096 **0.942**; the SwiGLU pair 1 unit 0.916, with
//   prefetch 1024 / 2048 0.799 / 0.786, 2 units 0.836; three digits' best 0.921 / 0.918 /
//   0.841. Prefetch costs the int4 split keys (two digits too): 5632 x 2048 0.911 -> 0.837
//   at 2048 bytes, 2048 x 5632 (4 units) 0.849 -> 0.757 at 1 unit and 4096, the pair 0.913
//   -> 0.620; so only int8 keys without a pair take it.
// AVX2 tiles keep the general rule everywhere (not measured on Zen 4).
#pragma once

#include <cstdint>

#include "jit/cpu/cpu_info.h"
#include "jit/gemm/gemm_key.h"

namespace qforge {

// The most panel streams a decode tile (M buckets one and small) reads at once.
inline constexpr int kMaxDecodeStreams = 8;

struct TileStreaming {
  int max_units = 8;                   // 16-column units per tile
  int max_panels = kMaxDecodeStreams;  // panels per tile: units x P
  int prefetch_distance = 1024;        // bytes ahead in each panel stream (0: none)

  bool operator==(const TileStreaming& o) const {
    return max_units == o.max_units && max_panels == o.max_panels &&
           prefetch_distance == o.prefetch_distance;
  }
};

inline constexpr TileStreaming kGeneralDecodeStreaming{};
inline constexpr TileStreaming kGeneralGemmStreaming{4, 4 * 2, 0};  // panels: no extra bound
inline constexpr TileStreaming kZen4GemvStreaming{1, kMaxDecodeStreams, 0};    // M = 1
inline constexpr TileStreaming kZen4DecodeStreaming{8, kMaxDecodeStreams, 0};  // other decode
inline constexpr TileStreaming kZen4WideSplitStreaming{4, kMaxDecodeStreams, 0};
inline constexpr TileStreaming kZen4Int8SplitStreaming{1, kMaxDecodeStreams, 4096};
// Digit-row bytes (D x Kp) up to which a split key on Zen 4 keeps the GEMV rule.
inline constexpr std::int64_t kZen4NarrowSplitBytes = 4096;
inline constexpr TileStreaming kZen4SubByteGemmStreaming{4, 2, 1024};  // int4 / int5, M >= 5

// The rule for `cpu` running `key`'s tile: the general one for its bucket unless the key
// is an avx512-vnni key on a Zen 4 part (then its decode tile, or an integer sub-byte
// GEMM tile, takes the Zen 4 rule).
TileStreaming tile_streaming_for(const CpuInfo& cpu, const GemmKey& key);

// Whether `key` (before its blocking) sums in four chains on `cpu` (GemmKey::woq_chains): a
// weight-only zmm GEMV on Zen 4, whose one-unit tile would otherwise be one chain of FMA or
// vdpbf16ps latencies.
bool weight_only_gemv_chains(const CpuInfo& cpu, const GemmKey& key);

}  // namespace qforge
