// AWQ (Lin et al. 2023), activation-aware weight scaling: the input channels that carry
// large activations get their weights scaled up before quantization, and the inputs
// scaled down by as much, so the salient weights lose less to rounding:
//
//   s_j       = mean|x_j|^alpha, normalised to s_max s_min = 1
//   error(a)  = || (Q(W diag(s)) diag(s)^-1 - W) X^T ||^2 / count
//             = sum over rows r of e_r G e_r^T          G = the input's Gram matrix
//                                                       (its diagonal E[x^2] without one)
//   alpha     = argmin over the grid 0, 1/20, ..., 19/20 (alpha 0 is round-to-nearest)
//   Q         the quantizer the layer gets: with the clipping search (on the scaled
//             input's Gram matrix), or plain round-to-nearest
// evaluated on up to `search_rows` rows of W spread evenly (rows are independent).
//
// The model-level step (calib/awq_model.h) folds diag(s)^-1 into what feeds the input
// (an RMSNorm weight, v's rows, up's rows) and diag(s) into W's columns.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ops/quant/quantize.h"

namespace qforge {

struct AwqOptions {
  int grid = 20;          // alphas i / grid, i in [0, grid)
  int search_rows = 512;  // rows of W the error is measured on (all when fewer)
  bool clip = true;       // then per-group clipping search (search_group_params)
};

// What AWQ reads of a layer's input.
struct AwqInput {
  std::string name;  // the site, for messages
  int k = 0;
  std::span<const double> mean_abs;  // k
  std::span<const double> mean_sq;   // k
  std::span<const double> gram;      // k x k, or empty: its diagonal mean_sq stands in
};

struct AwqScales {
  double alpha = 0;
  std::vector<double> s;  // k
  double error = 0;       // at alpha
  double rtn_error = 0;   // at alpha 0 (s = 1): the clipped (or plain) round-to-nearest
};

// `weights` are the row-major matrices that read the input (q, k, v; gate, up), each
// rows[i] x k. `tie` > 1 makes channels c and c' with c % tie_period == c' % tie_period
// and c / tie_period / tie == c' / tie_period / tie share one scale (wo's inputs: the
// query heads of one kv head read the same v rows: tie = heads per kv head, period =
// head_dim); 1: every channel its own.
AwqScales search_awq_scales(const std::vector<const float*>& weights,
                            const std::vector<std::int64_t>& rows, const AwqInput& input,
                            const QuantScheme& scheme, const AwqOptions& options, int tie = 1,
                            int tie_period = 1, int threads = 1);

// Round-to-nearest with each group's range shrunk on the clipping grid (calib/gptq.h) to
// the factor that least moves the layer's output on the group's inputs: e G_gg e^T, with
// G_gg the group's block of `gram` (k x k, the Gram matrix of the input the matrix reads),
// or with `gram` empty its diagonal `energy` (E[x_j^2]) alone. Per-channel or per-group.
QuantizedTensor quantize_clipped(const float* weights, std::int64_t n, std::int64_t k,
                                 const QuantScheme& scheme, const double* energy,
                                 std::span<const double> gram = {}, int threads = 1);

}  // namespace qforge
