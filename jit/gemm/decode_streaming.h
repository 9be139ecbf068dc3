// How the analytic default blocking streams a decode tile's panels (M <= 4, zmm kernels)
// on the CPU at hand. A GEMV is a read of the packed weights; the tile decides how many
// panel streams run side by side and how far ahead prefetcht0 reaches in each:
//
//   tile MR x NR, panels p .. p + NR - 1 of one call's chunk
//     general   NR up to kMaxDecodeStreams streams, prefetch 1024 bytes ahead in each
//     Zen 4     no software prefetch; an integer GEMV (M = 1) also takes NR = 1: one
//               stream (two for a SwiGLU gate/up pair). Consecutive panels are adjacent,
//               so a thread's chunk is then read front to back
//
// Zen 4 (AMD family 19h with AVX-512; the other family 19h parts have none) was measured on
// a 2-vCPU guest (family 25 model 17), cold weight copies, 2 threads, the blockings in
// turns (docs/PERFORMANCE.md, "Zen 4: decode tiles without software prefetch"): 1 x 1
// without prefetch read int8 2048 x 2048 1.17-1.42x, int8 5632 x 2048 1.21x and int4-g128
// 1.17x as fast as the general 1 x 8 / 1 x 7 tiles at 1024 bytes, most of it the prefetch
// (the wide tiles without it: 1.09-1.22x); at M = 4 the int8 4 x 6 tile without prefetch 1.34x, the
// weight-only int8 GEMV 1.15x, the weight-only bf16 int4 GEMV (compute-bound) the same.
// On family 26 (Zen 5) and Sapphire Rapids guests the tuner kept the general default.
// AVX2 tiles keep the general rule everywhere (not measured on Zen 4), as do weight-only
// tiles' unit counts (their FMA chains want several units per tile).
#pragma once

#include "jit/cpu/cpu_info.h"
#include "jit/gemm/gemm_key.h"

namespace qforge {

struct DecodeStreaming {
  int max_units = 0;             // units per decode tile; 0: no limit beyond the streams
  int prefetch_distance = 1024;  // bytes ahead in each panel stream (0: none)

  bool operator==(const DecodeStreaming& o) const {
    return max_units == o.max_units && prefetch_distance == o.prefetch_distance;
  }
};

inline constexpr DecodeStreaming kGeneralDecodeStreaming{};
inline constexpr DecodeStreaming kZen4GemvStreaming{1, 0};    // integer, M = 1
inline constexpr DecodeStreaming kZen4DecodeStreaming{0, 0};  // the other decode tiles

// The rule for `cpu` running `key`'s decode tile (general unless the key is an
// avx512-vnni decode key, M <= 4, on a Zen 4 part).
DecodeStreaming decode_streaming_for(const CpuInfo& cpu, const GemmKey& key);

}  // namespace qforge
