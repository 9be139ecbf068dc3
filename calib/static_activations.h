// Static W8A8 activation scales: one int8 scale per linear input, fixed at load time from
// calibration, so the hot path quantizes without a per-row max pass
// (ops/quant/activation.h):
//
//   a(layer) = max over calibration tokens t and channels j of |x[t][j]| / 127
//
// then, when calibrating on chunks here, clipped: clip * a for the clip of kStaticClipGrid
// whose rounding error on sampled input rows, weighted by the weight columns' squared
// norms, is least (a calibration file has no rows: the maximum as it is).
//
// `auto` (a fallback ratio R > 0): a layer stays static where that error is at most R
// times the error of per-row (dynamic) scales on the same rows, and keeps dynamic
// activations otherwise (SwiGLU's outputs, which reach ffn_down, vary most per token).
//
// x as the layer sees it: after SmoothQuant's or AWQ's 1/s (a calibration file's f32
// statistics are divided by the input scales given; chunks are calibrated here on the
// model as it now is, its folds included). Every block's quantized linear layer gets a
// scale (ModelFile::set_activation_scale), except those auto keeps dynamic (any scale
// they held is cleared); the classifier keeps per-row scales.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "calib/calibration_file.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"

namespace qforge {

inline constexpr double kStaticClipGrid[] = {1.0, 0.9,  0.8, 0.7,  0.6, 0.5,  0.45,
                                             0.4, 0.35, 0.3, 0.25, 0.2, 0.15, 0.1};
inline constexpr int kStaticSampleRows = 1024;
inline constexpr double kStaticAutoFallback = 3.0;  // --act auto's R

struct StaticActivationSource {
  const CalibrationFile* file = nullptr;  // or
  std::vector<std::vector<int>> chunks;   // chunks of tokens, BOS first (calibrated here)
  // With `file`: each site's s when a method since divided its inputs by s (SmoothQuant /
  // AWQ summaries' input_scales); sites absent from it are unscaled.
  const std::map<std::string, std::vector<double>, std::less<>>* input_scales = nullptr;
  double fallback = 0;  // auto's R (needs chunks); 0: every layer static
};

struct StaticLayer {
  std::string name;
  float scale = 0;         // the static int8 scale
  double error_ratio = 0;  // static / dynamic rounding error on the samples (0: no samples)
  bool is_static = true;   // false: auto kept the layer dynamic
};

struct StaticActivationSummary {
  std::vector<StaticLayer> layers;  // every block layer, in forward order
  double seconds = 0;
};

// Throws naming --act for a dense precision, auto with a file, or another model's
// calibration file.
StaticActivationSummary apply_static_activations(
    ModelFile& model, const Precision& precision, const StaticActivationSource& source, int threads,
    const std::function<void(int, int)>& progress = {});

}  // namespace qforge
