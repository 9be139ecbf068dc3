// The scalar oracle for every kernel: y = x W^T over packed weights, with the exact
// integer semantics of DESIGN.md and the epilogues of jit/kernel/epilogue.h.
//
// For row m, output column n (within its half for an interleaved pair) and group j:
//   C   = sum_k xq[m][k] * (operand[n][k] - bias)    (int32, exact; bias per packed_layout.h)
//   y   = fma(float(C), scale[n][j], y)              (float, groups in order from y = 0)
//   y   = fma(float(xsum[m][j]), offset[n][j], y)    (asymmetric only)
//   y  *= a[m]
// then the epilogue. Kept deliberately simple: loops, no tricks.
//
// Weight-only (f32 activations, float_activations.h), in double and rounded once:
//   y   = sum_j scale[n][j] * sum_k x[m][k] * (operand[n][k] - bias)
//         (+ offset[n][j] * xsum[m][j], xsum the activations' float group sums)
// then the same epilogue.
#pragma once

#include <cstdint>

#include "jit/kernel/epilogue.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"
#include "ops/quant/pack.h"

namespace qforge {

// C[m][n][j] for every logical output column (for a pair: the N gate columns, then the N
// up columns), laid out [m][column][group].
void group_sums_reference(const PackedWeights& w, const QuantizedActivations& x, std::int32_t* out);

// Runs the whole kernel semantics. `out` is float or uint8_t [M][ldc] per e.output
// (group_sums: int32 [M][columns][groups], ldc ignored).
void gemm_reference(const PackedWeights& w, const QuantizedActivations& x, const Epilogue& e,
                    const EpilogueArgs& args, void* out, std::int64_t ldc);

void gemm_reference(const PackedWeights& w, const FloatActivations& x, const Epilogue& e,
                    const EpilogueArgs& args, void* out, std::int64_t ldc);

// The epilogue's scalar pieces, shared with tests.
float silu_reference(float v);
std::uint8_t requantize_reference(float y, float out_scale, std::int32_t zero_point);

}  // namespace qforge
