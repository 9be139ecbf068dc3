// SmoothQuant (Xiao et al. 2022): move the activation outliers of each linear input into
// the weights, whose per-channel int8 quantization absorbs them, so that per-token (or
// per-tensor) int8 activations lose little:
//
//   s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)      max|W_j| over every matrix reading j
//                                                     (1 where either is 0)
//   x / s folded into what feeds the input, W diag(s) into the weights
//   (calib/input_scaling.h); wo's scales shared by the query heads of a kv head.
//
// alpha 0.5 by default (the paper's and IPEX's); `auto`: per layer, the alpha of the grid
// 0.3, 0.4, ..., 0.9 whose W8A8 output (the layer's weights quantized by its scheme, the
// smoothed inputs int8 per token as the kernels quantize them) lies nearest the f32
// output on sampled calibration rows. Norms, v and up change; the model is the same
// function.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "calib/calibration_file.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"

namespace qforge {

struct SmoothQuantSource {
  const CalibrationFile* file = nullptr;  // or
  std::vector<std::vector<int>> chunks;   // chunks of tokens, BOS first (calibrated here)
};

inline constexpr double kSmoothQuantAuto = -1;  // `alpha` for the per-layer search
inline constexpr int kSmoothQuantSampleRows = 256;

struct SmoothQuantSummary {
  int layers = 0;
  std::vector<std::pair<std::string, double>> alphas;            // per layer, the alpha applied
  double largest_outlier_before = 0, largest_outlier_after = 0;  // max / median of max|x|
  // Each smoothed site's s (its inputs are now x / s), as AwqSummary::input_scales.
  std::map<std::string, std::vector<double>, std::less<>> input_scales;
  double seconds = 0;
};

// The scales of one input: `activation_absmax` (k) and the weights reading it.
std::vector<double> smoothquant_scales(std::span<const float> activation_absmax,
                                       const std::vector<std::vector<float>>& weights,
                                       double alpha);

// Smooths every block's quantized linear inputs with `alpha` (or kSmoothQuantAuto: only
// from chunks, which give the sample rows). Throws naming --smoothquant for a dense or
// native precision, --sq-alpha outside [0, 1] or auto with a file, or another model's
// calibration file.
SmoothQuantSummary apply_smoothquant(ModelFile& model, const Precision& precision,
                                     const SmoothQuantSource& source, double alpha, int threads,
                                     const std::function<void(int, int)>& progress = {});

}  // namespace qforge
