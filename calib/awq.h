// AWQ (Lin et al. 2023), activation-aware weight scaling: the input channels that carry
// large activations get their weights scaled up before quantization, and the inputs
// scaled down by as much, so the salient weights lose less to rounding:
//
//   s_j       = mean|x_j|^alpha, normalised to s_max s_min = 1
//   error(a)  = || (Q(W diag(s)) diag(s)^-1 - W) X^T ||^2 / count
//             = sum over rows r of e_r G e_r^T          G = the input's Gram matrix
//                                                       (its diagonal E[x^2] without one)
//   alpha     = argmin over the grid 0, 1/20, ..., 19/20 (alpha 0 is round-to-nearest)
// or, with the block objective, the error the block's output takes (AutoAWQ's
// "module to inspect", here the whole block):
//   error(a)  = || block(x; layer <- Q(W diag(s)) diag(s)^-1) - block(x) ||^2 / tokens
// which also weighs what the attention softmax, the SwiGLU gate and the layers after this
// one make of the layer's error, where the Gram form sees the layer's output alone.
//   Q         the quantizer the layer gets: with the clipping search (on the scaled
//             input's Gram matrix), or plain round-to-nearest
// evaluated on up to `search_rows` rows of W spread evenly (rows are independent).
//
// The model-level step (calib/awq_model.h) folds diag(s)^-1 into what feeds the input
// (an RMSNorm weight, v's rows, up's rows) and diag(s) into W's columns.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "ops/quant/quantize.h"

namespace qforge {

// What the alpha search minimises: the layer's own output error (its Gram matrix), or
// the error of the block's output with the layer quantized (needs the calibration pass:
// calib/calibrator.h's BlockRerun).
enum class AwqObjective { layer, block };

struct AwqOptions {
  int grid = 20;          // alphas i / grid, i in [0, grid)
  int search_rows = 512;  // rows of W the layer error is measured on (all when fewer)
  bool clip = true;       // then per-group clipping search (search_group_params)
  AwqObjective objective = AwqObjective::layer;
  int block_chunks = 2;  // calibration chunks the block objective reruns (all when fewer)
};

// The block objective for one layer: the mean squared error of the block's output when
// the layer computes with `dequantized` (one matrix per weight, rows[i] x k, in the order
// search_awq_scales got them) in place of its weights.
using AwqOutputError = std::function<double(const std::vector<std::vector<float>>& dequantized)>;

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
// head_dim); 1: every channel its own. With `output_error` the alphas are scored by it
// (every row quantized), else by the Gram form on `search_rows` rows.
AwqScales search_awq_scales(const std::vector<const float*>& weights,
                            const std::vector<std::int64_t>& rows, const AwqInput& input,
                            const QuantScheme& scheme, const AwqOptions& options, int tie = 1,
                            int tie_period = 1, int threads = 1,
                            const AwqOutputError& output_error = {});

// Round-to-nearest with each group's range shrunk on the clipping grid (calib/gptq.h) to
// the factor that least moves the layer's output on the group's inputs: e G_gg e^T, with
// G_gg the group's block of `gram` (k x k, the Gram matrix of the input the matrix reads),
// or with `gram` empty its diagonal `energy` (E[x_j^2]) alone. Per-channel or per-group.
QuantizedTensor quantize_clipped(const float* weights, std::int64_t n, std::int64_t k,
                                 const QuantScheme& scheme, const double* energy,
                                 std::span<const double> gram = {}, int threads = 1);

}  // namespace qforge
