// How many vector registers a GEMM/GEMV register tile needs. One function answers for
// the generator (which asserts it) and for the blocking heuristic and the tuner (which
// never propose a tile that does not fit).
//
// Roles, for a tile of MR rows x NR units (P = NR * panels_per_unit packed panels,
// V vectors of each 16-column panel per pass, T = P * V vectors per row):
//   accumulators     MR * T           int32, from the top of the register file down
//   float sums       MR * T           only when the kernel has several groups; kept in
//                                     registers if they fit, else in the stack frame
//   weights          T (int8 + VNNI)  or 2T (int4 low/high nibbles; int8 without VNNI:
//                                     w and |w|), from register 0 up
//   fixed            1 broadcast (+ nibble mask, + one AVX2 dot temp; AVX2's 0x80 and
//                    ones16 constants are memory operands)
//   weight-only      weights 1 + T (the converted field, the packed row's operand
//                    vectors), fixed MR (x broadcast per row); masks are memory operands
// The epilogue needs kEpilogueTemps registers besides the live sums.
//
// V is the whole panel (1 zmm or 2 ymm) except for the ymm SwiGLU GEMM (M > 1): there a
// gate/up pair needs 4 ymm per row, which leaves room for one row on AVX2, so the kernel
// makes one pass per 8-column half of the panels (V = 1), with the second half's weights
// re-read from L2:
//
//   panel pair  gate [cols 0-7 | cols 8-15]  up [cols 0-7 | cols 8-15]
//   pass 0      gate cols 0-7,  up cols 0-7   -> silu(g) * u for output columns 0-7
//   pass 1      gate cols 8-15, up cols 8-15  -> output columns 8-15
#pragma once

#include "jit/gemm/gemm_key.h"
#include "jit/gemm/tile_streaming.h"

namespace qforge {

inline constexpr int kEpilogueTemps = 6;
inline constexpr int kWoqChains = 4;  // accumulator chains of a GemmKey::woq_chains key

struct VectorIsa {
  int registers;     // 32 zmm or 16 ymm
  int vector_bytes;  // 64 or 32
  bool vnni;         // vpdpbusd available (else the AVX2 vpmaddubsw sequence)
  int vectors_per_panel() const { return 64 / vector_bytes; }
};
VectorIsa vector_isa_of(Isa isa);

struct RegisterPlan {
  int accumulators = 0;
  int float_sums = 0;  // 0 when single group or kept in memory
  bool float_sums_in_memory = false;
  int weights = 0;
  int fixed = 0;
  int chains = 0;  // weight-only chains 1..3 of each accumulator (GemmKey::woq_chains)
  int total() const { return accumulators + float_sums + chains + weights + fixed; }
};

// Vectors of each panel one pass of the kernel handles (V above).
int slice_vectors(const GemmKey& key);

// The plan for `blocking` under `key`'s ISA and scheme; fits() says whether it is legal.
RegisterPlan plan_registers(const GemmKey& key, const Blocking& blocking);
bool fits(const GemmKey& key, const Blocking& blocking);

// The analytic default blocking for a key (its own blocking field is ignored); for AMX
// keys the fixed tile blocking (amx_tile_plan.h). Tiles stream as `streaming` says, by
// default this CPU's rule for the key (tile_streaming.h).
Blocking default_blocking(const GemmKey& key, const TileStreaming& streaming);
Blocking default_blocking(const GemmKey& key);

}  // namespace qforge
