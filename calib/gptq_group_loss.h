// GPTQ's loss on one group of a row for every range of the clipping grid, the ranges side
// by side (what the clipping search of calib/gptq.cpp scores):
//
//   w  count x lanes doubles, the range fastest: the group's values, one copy per range
//   for column i of the group, in order:
//     q_ir  = Q_r(w_ir)                    quantize_value with range r's parameters
//     e_ir  = (w_ir - deq_r(q_ir)) / U_ii
//     loss_r += e_ir^2
//     w_jr -= e_ir U_ij                    every later column j of the group
//
// Two implementations of the same arithmetic, operation for operation (no fused
// multiply-add): the scalar one is the definition; the AVX2 one runs four ranges per
// instruction (the ranges padded to kClipLanes). gptq_group_losses takes the AVX2 one
// where the CPU has it; the suite compares the two bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/quant/quantize.h"

namespace qforge {

inline constexpr int kClipLanes = 24;  // at most this many ranges: six ymm of doubles

// loss[r] for r < ranges, the group's columns `values[0 .. count)` with factor rows
// u + i * ld (u[i * ld + j] = U_ij of the group's columns i, j); scratch is resized.
void gptq_group_losses(const float* values, std::int64_t count, const double* u, std::int64_t ld,
                       const GroupParams* params, int ranges, int bits, bool asymmetric,
                       double* loss, std::vector<double>& scratch);
void gptq_group_losses_scalar(const float* values, std::int64_t count, const double* u,
                              std::int64_t ld, const GroupParams* params, int ranges, int bits,
                              bool asymmetric, double* loss, std::vector<double>& scratch);
void gptq_group_losses_avx2(const float* values, std::int64_t count, const double* u,
                            std::int64_t ld, const GroupParams* params, int ranges, int bits,
                            bool asymmetric, double* loss, std::vector<double>& scratch);

}  // namespace qforge
