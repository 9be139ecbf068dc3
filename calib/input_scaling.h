// Per-channel scaling of a linear layer's input, folded so the model computes what it
// computed before (SmoothQuant, AWQ, and the outlier variants that test them):
//
//   layer         the input x comes from       x / s folded into      W diag(s) into
//   attn_qkv      rmsnorm(h) * attn_norm       attn_norm /= s          q, k, v columns
//   attn_output   softmax(q k^T) v, per head   v rows /= s             wo columns
//   ffn_gate_up   rmsnorm(h) * ffn_norm        ffn_norm /= s           gate, up columns
//   ffn_down      silu(gate) * up              up rows /= s            down columns
//
// softmax(.) (v / s) = (softmax(.) v) / s and silu(g) * (u / s) = (silu(g) * u) / s
// exactly; wo's channel (query head h, d) reads v's row (kv head h / group, d), so the
// query heads of one kv head must share their scales (tie_scales does that).
#pragma once

#include <string>
#include <vector>

#include "model/format/model_file.h"

namespace qforge {

// Replaces the tensors of block `layer` that the fold of `site` ("attn_qkv", ...) changes.
void fold_input_scales(ModelFile& model, int layer, const std::string& site,
                       const std::vector<double>& s);

// For wo's input (dim channels): each channel's value replaced by the mean over the query
// heads of its kv head, so that one v row can carry the scale.
void tie_scales(std::vector<double>& values, const LlamaConfig& config);

// The row-major f32 values of a tensor, whatever its type in the file.
std::vector<float> tensor_f32(const ModelFile& model, const std::string& name);

}  // namespace qforge
