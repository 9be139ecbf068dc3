// AWQ over a whole model: for every block's four linear inputs the scales s of
// calib/awq.h, folded so the model computes what it computed before
// (calib/input_scaling.h: x / s into the norm, v rows or up rows; W diag(s)). The folded
// tensors replace the model's (ModelFile::replace_tensor); with the clipping search every
// quantized tensor of the block is then prequantized ("awq"). Layers the policy keeps
// dense or native are left alone; the classifier too.
//
//   from a calibration file   its mean |x| and Gram matrices (diagonal E[x^2] without)
//   from chunks of a text     the calibration pass runs here on the f32 model, a block
//                             at a time (folding preserves the function, so the next
//                             block's inputs are what they were)
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calib/awq.h"
#include "calib/calibration_file.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"

namespace qforge {

struct AwqSource {
  const CalibrationFile* file = nullptr;  // or
  std::vector<std::vector<int>> chunks;   // chunks of tokens, BOS first
};

struct AwqLayer {
  std::string name;  // "blk.0.attn_qkv"
  double alpha = 0, error = 0, rtn_error = 0;
};

struct AwqSummary {
  std::vector<AwqLayer> layers;
  // Each scaled site's s: its inputs are now x / s (a Gram matrix G of the unscaled
  // inputs becomes diag(1/s) G diag(1/s)).
  std::map<std::string, std::vector<double>, std::less<>> input_scales;
  double seconds = 0;
};

using AwqProgress = std::function<void(int done, int total)>;

AwqSummary apply_awq(ModelFile& model, const Precision& precision, const AwqSource& source,
                     const AwqOptions& options, int threads, const AwqProgress& progress = {});

}  // namespace qforge
