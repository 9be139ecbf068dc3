// The per-layer quantization report (`qforge quant-report`): for each linear layer of a
// model under a quantized precision, how much error it brings and how much that error
// costs at the logits.
//
//   f32 model, capture run over `capture_chunks` chunks  ->  each layer's f32 inputs X
//   per layer L (q|k|v and gate|up are one layer each, as the executor fuses them):
//     weight_rel_rms      ||W_q - W|| / ||W||          W_q: read back from the packed layer
//     output_rel_rms      ||L_q(X) - L(X)|| / ||L(X)||  the quantized layer, int8 activations
//     output_snr_db       -20 log10(output_rel_rms)
//     outlier_ratio       max channel absmax / median channel absmax of X
//     activation_rel_rms  ||deq(q8(X)) - X|| / ||X||   per-token int8 (the dynamic path)
//     sensitivity_kld     mean KLD of the logits over the text with only L quantized (every
//                         other layer f32), against the f32 model; and its standard error
//   and the mean KLD of the whole quantized model.
#pragma once

#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/runtime/model_session.h"

namespace qforge {

struct LayerQuantReport {
  std::string name;    // "blk.3.ffn_down"
  std::string kind;    // "ffn_down"
  std::string scheme;  // what the quantized model holds ("int4-g32", "Q4_0", "f32", ...)
  std::uint64_t quantized_bytes = 0, f32_bytes = 0;
  double weight_rel_rms = 0;
  double output_rel_rms = 0, output_snr_db = 0;
  double outlier_ratio = 0, activation_rel_rms = 0;
  double sensitivity_kld = 0, sensitivity_kld_stderr = 0;
};

struct QuantReport {
  std::string precision;  // the quantized precision, as printed
  std::string policy;     // its applied policy summary
  int ctx = 0, chunks = 0;
  std::int64_t scored_tokens = 0;
  double full_kld = 0, full_kld_stderr = 0;  // every layer quantized
  std::vector<LayerQuantReport> layers;      // forward order
};

struct QuantReportOptions {
  int ctx = 0;             // tokens per chunk
  int max_chunks = 0;      // chunks of the text for the KLDs (0: all)
  int capture_chunks = 2;  // chunks whose layer inputs the error figures use
  // The tensors a method replaced in the f32 session's file (SmoothQuant / AWQ folds),
  // so the weight errors compare against the weights that session runs.
  const std::map<std::string, std::vector<float>>* replaced = nullptr;
};

using ReportProgress = std::function<void(int done, int total)>;

// `f32` and `quantized` are sessions of the same model file; the f32 session's layers are
// swapped out and back in turn (it is unchanged afterwards). `tokens` start with BOS.
QuantReport make_quant_report(ModelSession& f32, ModelSession& quantized,
                              std::span<const int> tokens, const QuantReportOptions& options,
                              int threads, const ReportProgress& progress = {});

// The flags that give `layer` (a name of LlamaWeights::named_layers) the scheme `scheme`:
// "--tensor-type blk.3.attn_q=S --tensor-type blk.3.attn_k=S --tensor-type blk.3.attn_v=S".
std::vector<std::string> layer_tensor_patterns(const std::string& layer);

}  // namespace qforge
