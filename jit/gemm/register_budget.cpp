#include "jit/gemm/register_budget.h"

#include "jit/gemm/amx_tile_plan.h"
#include "jit/gemm/blocking_space.h"

namespace qforge {

VectorIsa vector_isa_of(Isa isa) {
  switch (isa) {
    case Isa::avx512_vnni:
    case Isa::amx:
      return {32, 64, true};
    case Isa::avx_vnni:
      return {16, 32, true};
    default:
      return {16, 32, false};
  }
}

int slice_vectors(const GemmKey& key) {
  const VectorIsa v = vector_isa_of(key.isa);
  const bool ymm_swiglu_gemm =
      v.vectors_per_panel() > 1 && key.epilogue.swiglu && key.bucket != MBucket::one;
  return ymm_swiglu_gemm ? 1 : v.vectors_per_panel();
}

RegisterPlan plan_registers(const GemmKey& key, const Blocking& b) {
  const VectorIsa v = vector_isa_of(key.isa);
  const int per_row = b.nr * key.panels_per_unit() * slice_vectors(key);
  RegisterPlan plan;
  plan.accumulators = b.mr * per_row;
  if (key.weight_only()) {
    plan.weights = 1 + per_row;  // the field being converted, the row's operand vectors
    // one x broadcast per row; bf16: and the nibble table vpermw reads (from a register:
    // a memory operand costs each lookup a load, and the loop 30% of its rate)
    plan.fixed = b.mr + (key.activation == ActivationKind::bf16 ? 1 : 0);
  } else {
    plan.weights = (key.bits != 8 || !v.vnni) ? 2 * per_row : per_row;
    plan.fixed = 1 + (key.bits != 8 ? 1 : 0) + (v.vnni ? 0 : 1);  // AVX2: one dot temp
  }
  if (key.woq_chains) plan.chains = (kWoqChains - 1) * plan.accumulators;
  if (key.groups() > 1) {
    const int in_registers =
        plan.accumulators + plan.accumulators + plan.chains + plan.weights + plan.fixed;
    if (in_registers <= v.registers && v.registers - 2 * plan.accumulators >= kEpilogueTemps)
      plan.float_sums = plan.accumulators;
    else
      plan.float_sums_in_memory = true;
  }
  return plan;
}

bool fits(const GemmKey& key, const Blocking& b) {
  if (b.mr < 1 || b.nr < 1 || b.k_unroll < 1 || b.prefetch_distance < 0) return false;
  if (key.split_digits() != 0 && b.mr != key.split_digits()) return false;  // D digit rows
  const VectorIsa v = vector_isa_of(key.isa);
  const RegisterPlan plan = plan_registers(key, b);
  return plan.total() <= v.registers &&
         v.registers - plan.accumulators - plan.float_sums >= kEpilogueTemps;
}

Blocking default_blocking(const GemmKey& key) {
  return default_blocking(key, tile_streaming_for(cpu_info(), key));
}

Blocking default_blocking(const GemmKey& key, const TileStreaming& streaming) {
  if (key.isa == Isa::amx) return amx_blocking(key);  // tiles, not a register plan
  const TileRows rows = tile_rows_of(key);
  Blocking best;
  double best_score = -1;
  for (int mr = rows.min; mr <= rows.max; ++mr)
    for (int nr = 1; nr <= streaming.max_units; ++nr) {
      Blocking b{mr, nr, 4, streaming.prefetch_distance};
      if (!fits(key, b)) continue;
      // A tile streams nr x P panels from memory at once (P = 2 for a SwiGLU gate/up
      // pair); past kMaxDecodeStreams the weight-only SwiGLU GEMV (1 x 7: 14 streams) read
      // 4-10% slower than at 1 x 3 or 1 x 4 on an AMD family 26 guest.
      if (nr * key.panels_per_unit() > streaming.max_panels) continue;
      const RegisterPlan plan = plan_registers(key, b);
      double score = 0;
      if (key.bucket == MBucket::large && !key.weight_only()) {
        // Dot products per K step (4 k) over the memory operands of that step, in panels
        // (16 columns; P a unit, two for a SwiGLU gate/up pair): one weight load per panel
        // and one broadcast per row, and where the float sums live in the stack frame
        // their load and store once a group (g / 4 steps), which g32 groups pay 8x as
        // often as g128:
        //   dots = MR x NR x P     loads = NR x P + MR (+ 2 x dots x 4 / g)
        const int panels = nr * key.panels_per_unit();
        const double dots = double(mr) * panels;
        double loads = panels + mr;
        if (plan.float_sums_in_memory) loads += 8.0 * dots / static_cast<double>(key.group);
        // Ties go to the taller tile: its weights, streamed from memory, serve more rows.
        score = dots / loads * 100 + dots + mr * 1e-3;
      } else {
        // Decode rows are fixed by M, so there the widest tile (most streams in flight,
        // up to kMaxDecodeStreams) wins; weight-only tiles convert each weight once for
        // all their rows: rows first.
        score = mr * 100 + nr;
        // A weight-only tile updates its sums once a group (g / 8 rows of conversions),
        // so sums in memory cost it nothing; its FMA chains want the widest tile.
        if (plan.float_sums_in_memory && !key.weight_only()) score *= 0.9;
      }
      if (score > best_score) best_score = score, best = b;
    }
  return best;
}

}  // namespace qforge
