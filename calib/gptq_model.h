// GPTQ over a whole model: every linear layer the precision quantizes (q|k|v, wo,
// gate|up, down of each block; the classifier keeps round-to-nearest) gets GPTQ's
// integers, attached to the ModelFile as prequantized tensors (model/model_file.h), so
// the build that follows packs them into the ordinary layout.
//
//   one-shot     Hessians from a calibration file's Gram matrices (`qforge calibrate
//                --gram`): every layer sees the f32 model's inputs
//   sequential   the calibration pass runs here, a block at a time over chunks of a text:
//                block l is observed on what the already-quantized blocks 0..l-1 compute,
//                quantized, and run again so that block l+1 sees its quantized outputs;
//                true-sequential: inside the block too, one layer at a time (qkv, then wo
//                on the outputs of the quantized qkv, gate|up, down), the block re-run
//                between them
//
// The tensors of one fused layer (q, k, v; gate, up) share its input, so one Hessian
// factor serves them all; only one block's Gram matrices and one factor live at a time.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "calib/calibration_file.h"
#include "calib/gptq.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"

namespace qforge {

struct GptqSource {
  const CalibrationFile* file = nullptr;  // one-shot, or
  std::vector<std::vector<int>> chunks;   // sequential: chunks of tokens, BOS first
  bool true_sequential = false;           // with chunks
  // One-shot after AWQ (calib/awq_model.h): the sites whose inputs are now x / s; their
  // Gram matrices G become diag(1/s) G diag(1/s).
  const std::map<std::string, std::vector<double>, std::less<>>* input_scales = nullptr;
};

struct GptqSummary {
  int layers = 0;   // linear layers quantized by GPTQ
  int tensors = 0;  // their tensors
  bool sequential = false;
  std::uint64_t calibration_tokens = 0;
  double seconds = 0, gptq_seconds = 0;  // all; the GPTQ arithmetic alone
};

using GptqProgress = std::function<void(int done, int total)>;

// Throws qforge::Error naming the flag or file when the precision quantizes no layer GPTQ
// can serve, or the calibration file lacks Gram matrices or is another model's.
GptqSummary apply_gptq(ModelFile& model, const Precision& precision, const GptqSource& source,
                       const GptqOptions& options, int threads, const GptqProgress& progress = {});

}  // namespace qforge
