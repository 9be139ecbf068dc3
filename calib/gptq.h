// GPTQ (Frantar et al. 2022): quantize a weight matrix column by column, each column's
// rounding error spread over the columns not yet quantized so that the layer's output on
// the calibration inputs moves as little as possible.
//
//   H   = G + damp * mean(diag G) * I        G = X^T X / count (the site's Gram matrix);
//                                             a channel never seen (G_jj = 0) gets H_jj = 1
//                                             and its weights 0
//   U   = upper Cholesky factor of H^-1       H^-1 = U^T U, as the inverse of H's
//                                             "reversed" factor: H = V V^T, V upper,
//                                             makes H^-1 = V^-T V^-1, so U = V^-1
//   for blocks of B columns [i1, i2), in processing order (natural, or act-order):
//     for column i in the block:
//       q_i = Q(w_i)                           the scheme's rounding, group parameters taken
//                                              when the group's first column comes up (of the
//                                              weights as updated so far), or all up front
//                                              with act-order ("static groups"); with the
//                                              clipping search, the range shrunk by the
//                                              factor of a grid that least moves the group
//                                              (sum of H_jj (w_j - deq q_j)^2)
//       e_i = (w_i - deq(q_i)) / U_ii
//       w_j -= e_i U_ij                        j in (i, i2): inside the block, at once
//     w_j -= sum_i e_i U_ij                    j >= i2: once per block (one matrix product)
//
// Every row is independent of the others (H is shared), so rows split over threads; the
// arithmetic is in double. The result is an ordinary QuantizedTensor of the scheme: the
// packed layout, kernels and speed are those of round-to-nearest.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "ops/quant/quantize.h"

namespace qforge {

struct GptqOptions {
  double damp = 0.01;      // fraction of mean(diag H) added to the diagonal
  int block = 128;         // columns per lazy batch update
  bool act_order = false;  // columns by decreasing H_jj (with static groups)
  // Group ranges shrunk on kClipGrid when that lowers the error: GPTQ's own loss on the
  // group, its columns quantized in turn with their errors pushed on (natural order), or
  // the H_jj-weighted rounding error of the weights as given (act-order's static groups).
  bool clip_search = true;
};

// The clipping grid: shrink factors 1, 0.98, ..., 0.60 of a group's range.
inline constexpr int kClipGrid = 21;
inline double clip_factor(int i) {
  return 1.0 - 0.02 * i;
}

// The candidates every clipping search scores, for a group spanning [lo, hi], round-to-
// nearest's own parameters first (so a search never loses to it; first wins ties):
//   - most schemes: the grid's shrunk ranges [lo p, hi p] (p = 1 is round-to-nearest);
//   - symmetric schemes with one level more below zero than above (int4: [-8, 7]): the
//     unclipped scale absmax / 7 shrunk by each p, each with both signs, which puts the
//     extra level on either side:
//          -8  -7 ...  0 ... 7         scale d > 0: q d covers [-8 d, 7 d]
//   d < 0:  8d  7d ... 0 ... -7d       the same integers cover [-7|d|, 8|d|]
//     (round-to-nearest's extreme / -8 lies between two factors of the grid).
std::vector<GroupParams> clip_candidates(float lo, float hi, int bits, bool asymmetric);

// The candidate among clip_candidates for `count` values whose rounding errors e
// (e_j = deq(q(v_j)) - v_j) `score` rates lowest (the first on ties).
GroupParams search_clip_candidates(const float* values, std::int64_t count, int bits,
                                   bool asymmetric,
                                   const std::function<double(std::span<const double>)>& score);

// The parameters among clip_candidates of `count` values that give the smallest sum of
// weight_j (v_j - deq(q(v_j)))^2 (first on ties); `weights` may be null (all 1).
GroupParams search_group_params(const float* values, const double* weights, std::int64_t count,
                                int bits, bool asymmetric);

// The inverse-Hessian factor of one input site, shared by every matrix that reads the
// site (q, k and v; gate and up).
class GptqHessian {
 public:
  // `gram` is k x k, row-major, symmetric. Throws when H is not positive definite even
  // after damping (naming `site`). LAPACK runs on `threads` threads.
  GptqHessian(std::span<const double> gram, int k, const GptqOptions& options,
              const std::string& site, int threads = 1);

  int k() const { return k_; }
  const GptqOptions& options() const { return options_; }
  const std::vector<int>& order() const { return order_; }  // column processed i-th
  bool dead(int column) const { return dead_[static_cast<std::size_t>(column)] != 0; }
  // The damped diagonal H_jj in natural column order.
  const double* diagonal() const { return diagonal_.data(); }
  // U in processing order: row i holds U_ij for j >= i.
  const double* factor_row(int i) const { return factor_.data() + std::size_t(i) * k_; }

 private:
  int k_;
  GptqOptions options_;
  std::vector<int> order_;
  std::vector<char> dead_;
  std::vector<double> diagonal_;
  std::vector<double> factor_;  // k x k
};

// GPTQ of the row-major n x k matrix `weights` under `scheme` (per-channel or per-group;
// per-tensor scales are refused) with `threads` threads.
QuantizedTensor gptq_quantize(const float* weights, std::int64_t n, std::int64_t k,
                              const QuantScheme& scheme, const GptqHessian& hessian,
                              int threads = 1);

// The output error of quantized weights on the inputs whose Gram matrix is `gram`:
// sum over rows r of e_r G e_r^T with e_r = deq(q)_r - w_r, i.e. ||(W_q - W) X^T||^2 / count.
double output_error(const float* weights, const QuantizedTensor& quantized,
                    std::span<const double> gram);

}  // namespace qforge
