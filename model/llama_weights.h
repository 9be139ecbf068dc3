// The model's weights as the executor uses them, built from a ModelFile under one
// precision policy:
//
//   token embedding     f32 rows (vocab x dim), looked up per token
//   norms               f32
//   per layer           wqkv  [q | k | v] rows concatenated   plain     dim -> dim + 2 kv_dim
//                       wo                                    residual  dim -> dim
//                       gate/up pair                          swiglu    dim -> hidden
//                       down                                  residual  hidden -> dim
//   classifier          plain, dim -> vocab
//
// f32: every linear layer through oneDNN. int8 / int4: linear layers through the JIT
// kernels with the chosen scheme, the classifier int8 per-channel (or f32 on request).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "model/linear_layer.h"
#include "model/llama_config.h"
#include "model/model_file.h"
#include "ops/quant/scheme.h"

namespace qforge {

struct Precision {
  bool quantized = true;     // false: f32 everywhere
  QuantScheme scheme;        // the linear layers' scheme when quantized
  bool lm_head_f32 = false;  // keep the classifier f32 in a quantized model
};

// "f32" | "int8" | "int8-g<G>[-asym]" | "int4-g<G>[-asym]" ...; lm_head "" (the default
// for the mode), "int8" or "f32". Throws qforge::Error naming the option.
Precision parse_precision(std::string_view quant, std::string_view lm_head = "");
std::string to_string(const Precision& precision);

struct LayerWeights {
  std::vector<float> attn_norm;  // dim
  std::vector<float> ffn_norm;   // dim
  std::unique_ptr<LinearLayer> wqkv, wo, gate_up, down;
};

struct LlamaWeights {
  LlamaConfig config;
  Precision precision;
  std::vector<float> embedding;  // vocab x dim
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // dim
  std::unique_ptr<LinearLayer> classifier;

  // Every kernel key the linear layers call (duplicates included).
  std::vector<GemmKey> warmup_keys() const;
  // Bytes of all weights as stored for inference (linear layers, embedding, norms).
  std::uint64_t weight_bytes() const;
};

// Converts and packs every tensor with `threads` threads (0: all cores). Kernel ISAs are
// chosen now, so set the ISA cap before calling.
LlamaWeights build_llama_weights(const ModelFile& model, const Precision& precision,
                                 int threads = 0);

}  // namespace qforge
