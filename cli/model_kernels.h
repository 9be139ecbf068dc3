// The kernels a model's linear layers run, by layer, for `qforge dump-asm -m MODEL`:
//
//   kernel                                              N      K  layers
//   gemm_u8s8_avx2_n2560_k2048_pc_w8s_m1_1x4u4_deq-f32  2560   2048  22  (blk.*.attn_qkv)
//   ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "model/runtime/llama_weights.h"

namespace qforge::cli {

struct ModelKernel {
  GemmKey key;
  std::vector<std::string> layers;  // the layers that call it
};

// The distinct kernels the model's layers run for M rows, in forward order.
std::vector<ModelKernel> model_kernels(const LlamaWeights& weights, std::int64_t m);

// Prints the table above to stdout.
void print_model_kernels(const std::vector<ModelKernel>& kernels, std::int64_t m);

// The key of layer `name` (a name from LlamaWeights::named_layers, e.g. blk.0.ffn_down,
// or a kernel name from the table); throws qforge::Error listing the layer names if none.
GemmKey model_layer_key(const LlamaWeights& weights, const std::string& name, std::int64_t m);

}  // namespace qforge::cli
