// The model's weights as the executor uses them, built from a ModelFile under one
// precision policy:
//
//   token embedding     rows (vocab x dim), looked up per token: f32, or int8 with one
//                       scale per row in a quantized model (dequantized on lookup)
//   norms               f32
//   per layer           wqkv  [q | k | v] rows concatenated   plain     dim -> dim + 2 kv_dim
//                       wo                                    residual  dim -> dim
//                       gate/up pair                          swiglu    dim -> hidden
//                       down                                  residual  hidden -> dim
//   classifier          plain, dim -> vocab
//
// Which precision each of these gets is the policy: the defaults below, overridden per
// tensor by Precision::rules (model/tensor_policy.h).
//
// f32 / bf16: every linear layer through oneDNN in that type. int8 / int4: linear layers
// through the JIT kernels with the chosen scheme, the classifier int8 per-channel (or
// f32 / bf16 on request). native: a Q8_0 / Q4_0 / Q4_1 tensor of a GGUF file is repacked
// as it is (int8 / int4 g32; Q4_1 asymmetric with float offsets; no requantization); any
// other tensor gets `scheme`. A tensor the ModelFile holds prequantized under the scheme
// its layer gets (GPTQ: ModelFile::set_prequantized) is packed as it is.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "model/format/llama_config.h"
#include "model/format/model_file.h"
#include "model/runtime/embedding_table.h"
#include "model/runtime/kv_rows.h"
#include "model/runtime/linear_layer.h"
#include "model/runtime/tensor_policy.h"
#include "ops/quant/scheme.h"

namespace qforge {

enum class DenseType { f32, bf16 };

struct Precision {
  bool quantized = true;             // false: every linear layer dense (oneDNN)
  DenseType dense = DenseType::f32;  // the dense layers' weight type
  QuantScheme scheme;                // the linear layers' scheme when quantized
  bool native = false;  // quantized: keep a GGUF file's Q8_0 / Q4_0 / Q4_1 tensors as they are
  bool lm_head_dense = false;  // quantized model: classifier dense (type `dense`)
  bool lm_head_int8 = false;   // --lm-head int8: int8 per-channel even in a native run
  // Per-tensor choices over the defaults above (model/tensor_policy.h): presets, then
  // --tensor-type / --keep in the order given; the last match decides.
  std::vector<TensorRule> rules;
  KvType kv = KvType::f32;  // the KV cache's element type (model/kv_cache.h)
};

// "f32" | "bf16" | "int8" | "int8-g<G>[-asym]" | "int4-g<G>[-asym]" | "native" | "" (=
// native: a quantized GGUF keeps its own quantization, anything else gets int8), each
// scheme and native also as "woq-..." (weight-only: f32 activations); lm_head
// "" (the default for the mode), "int8", "f32" or "bf16". Throws qforge::Error naming the
// option.
Precision parse_precision(std::string_view quant, std::string_view lm_head = "");
std::string to_string(const Precision& precision);

struct LayerWeights {
  std::vector<float> attn_norm;  // dim
  std::vector<float> ffn_norm;   // dim
  std::vector<float> qkv_bias;   // [ q (dim) | k (kv_dim) | v (kv_dim) ], or empty
  std::unique_ptr<LinearLayer> wqkv, wo, gate_up, down;
};

struct LlamaWeights {
  LlamaConfig config;
  Precision precision;
  EmbeddingTable embedding;  // vocab x dim
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // dim
  std::unique_ptr<LinearLayer> classifier;
  // The applied policy: each layer (token_embd, blk.N.attn_qkv, ..., output) and what it
  // holds ("int8", "int4-g32", "Q4_0" for a native layer, "f32", "bf16").
  std::vector<std::pair<std::string, std::string>> policy;

  // Every kernel key the linear layers call (duplicates included).
  std::vector<GemmKey> warmup_keys() const;
  // Each linear layer by name ("blk.0.attn_qkv", "blk.0.attn_output", "blk.0.ffn_gate_up",
  // "blk.0.ffn_down", ..., "output"), in forward order.
  std::vector<std::pair<std::string, const LinearLayer*>> named_layers() const;
  // The slot of the linear layer of that name (as named_layers() names it), to swap a
  // layer between two models of the same shape; throws if there is none.
  std::unique_ptr<LinearLayer>& linear_slot(std::string_view name);
  // Bytes of all weights as stored for inference (linear layers, embedding, norms).
  std::uint64_t weight_bytes() const;
  // Bytes of weights one decode step reads (all linear layers and norms, one embedding row).
  std::uint64_t decode_bytes_per_token() const;
  // Multiply-adds of the linear layers per token (the parameters they hold).
  std::uint64_t linear_parameters() const;
  // Moves every JIT layer's packed weights into one huge-page arena (huge_page_arena.h), in
  // the order a decode step reads them; build_llama_weights does it once all are built.
  void place_packed_weights_in_one_arena();
  // True when some layer runs through the JIT kernels (the session's pool then has all
  // threads).
  bool has_jit_layers() const { return !warmup_keys().empty(); }
};

// The applied policy, one entry per layer kind: "attn_qkv int8 x22, ..., ffn_down int8 x21
// + f32 x1 (blk.3), output f32, token_embd int8".
std::string policy_summary(const LlamaWeights& weights);

// What each linear layer gets under `precision`, decided and checked as
// build_llama_weights decides it: the layer (named_layers' names), its source tensors in
// row order (q, k, v; gate, up), and the choice.
struct PlannedLayer {
  std::string name;
  std::vector<std::string> tensors;
  TensorChoice choice;
};
std::vector<PlannedLayer> plan_linear_layers(const ModelFile& model, const Precision& precision);
// The one layer `layer` describes, built as build_llama_weights builds it (to swap into a
// model with LlamaWeights::linear_slot).
std::unique_ptr<LinearLayer> build_linear_layer(const ModelFile& model, const PlannedLayer& layer,
                                                int threads);

// Converts and packs every tensor with `threads` threads (0: all cores). Kernel ISAs are
// chosen now, so set the ISA cap before calling.
// `progress(done, total)` is called after each converted layer (total = layers + 1).
using LoadProgress = std::function<void(int done, int total)>;
LlamaWeights build_llama_weights(const ModelFile& model, const Precision& precision,
                                 int threads = 0, const LoadProgress& progress = {});

}  // namespace qforge
