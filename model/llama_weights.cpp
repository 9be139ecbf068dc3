#include "model/llama_weights.h"

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "model/dense_linear.h"
#include "model/jit_linear.h"
#include "ops/quant/pack.h"

namespace qforge {
namespace {

// All rows of `tensor` as row-major f32, appended to `out`.
void append_f32(const TensorView& tensor, std::vector<float>& out) {
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(tensor.rows * tensor.columns));
  for (std::int64_t r = 0; r < tensor.rows; ++r)
    tensor.row_to_f32(r, std::span<float>(out.data() + start + r * tensor.columns,
                                          static_cast<std::size_t>(tensor.columns)));
}

std::vector<float> to_f32(const TensorView& tensor) {
  std::vector<float> out;
  append_f32(tensor, out);
  return out;
}

const QuantScheme kPerChannelInt8{};

class LayerBuilder {
 public:
  LayerBuilder(const Precision& precision, int threads)
      : precision_(precision), threads_(threads) {}

  // A plain or residual layer from row-major N x K weights.
  std::unique_ptr<LinearLayer> linear(const std::vector<float>& w, std::int64_t n, std::int64_t k,
                                      LinearFusion fusion, bool classifier = false) const {
    const bool dense = !precision_.quantized || (classifier && precision_.lm_head_f32);
    if (dense) return std::make_unique<DenseLinear>(w.data(), n, k, fusion);
    const QuantScheme& scheme = classifier ? kPerChannelInt8 : precision_.scheme;
    return std::make_unique<JitLinear>(pack_weights(w.data(), n, k, scheme, threads_), fusion);
  }

  // The fused gate/up layer; `gate_up` holds the gate rows, then the up rows.
  std::unique_ptr<LinearLayer> swiglu(const std::vector<float>& gate_up, std::int64_t hidden,
                                      std::int64_t k) const {
    if (!precision_.quantized)
      return std::make_unique<DenseLinear>(gate_up.data(), hidden, k, LinearFusion::swiglu);
    const float* gate = gate_up.data();
    const float* up = gate + hidden * k;
    return std::make_unique<JitLinear>(
        pack_swiglu_pair(gate, up, hidden, k, precision_.scheme, threads_), LinearFusion::swiglu);
  }

 private:
  const Precision& precision_;
  int threads_;
};

}  // namespace

Precision parse_precision(std::string_view quant, std::string_view lm_head) {
  Precision precision;
  if (quant == "f32") {
    precision.quantized = false;
  } else {
    try {
      precision.scheme = parse_quant_scheme(quant, "--quant");
    } catch (const Error& e) {
      fail(e.what(), "; or f32");
    }
    validate(precision.scheme);
  }
  if (lm_head == "f32")
    precision.lm_head_f32 = true;
  else
    QF_REQUIRE(lm_head.empty() || lm_head == "int8", "--lm-head: '", lm_head,
               "' is not one of int8, f32");
  return precision;
}

std::string to_string(const Precision& precision) {
  if (!precision.quantized) return "f32";
  return to_string(precision.scheme) + (precision.lm_head_f32 ? " (lm-head f32)" : "");
}

std::vector<GemmKey> LlamaWeights::warmup_keys() const {
  std::vector<GemmKey> keys;
  auto add = [&](const LinearLayer& layer) {
    for (const GemmKey& key : layer.warmup_keys()) keys.push_back(key);
  };
  for (const LayerWeights& layer : layers)
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down}) add(**linear);
  add(*classifier);
  return keys;
}

std::uint64_t LlamaWeights::weight_bytes() const {
  std::uint64_t bytes = (embedding.size() + output_norm.size()) * sizeof(float);
  for (const LayerWeights& layer : layers) {
    bytes += (layer.attn_norm.size() + layer.ffn_norm.size()) * sizeof(float);
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down})
      bytes += (*linear)->weight_bytes();
  }
  return bytes + classifier->weight_bytes();
}

LlamaWeights build_llama_weights(const ModelFile& model, const Precision& precision, int threads) {
  if (threads <= 0) threads = default_load_threads();
  const LlamaConfig& c = model.config();
  LlamaWeights out;
  out.config = c;
  out.precision = precision;
  out.embedding = to_f32(model.tensor("token_embd.weight"));
  out.output_norm = to_f32(model.tensor("output_norm.weight"));
  const LayerBuilder build(precision, threads);
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights layer;
    layer.attn_norm = to_f32(model.layer_tensor(l, "attn_norm"));
    layer.ffn_norm = to_f32(model.layer_tensor(l, "ffn_norm"));
    std::vector<float> qkv;
    for (const char* role : {"attn_q", "attn_k", "attn_v"})
      append_f32(model.layer_tensor(l, role), qkv);
    layer.wqkv = build.linear(qkv, c.dim + 2 * c.kv_dim(), c.dim, LinearFusion::plain);
    layer.wo = build.linear(to_f32(model.layer_tensor(l, "attn_output")), c.dim, c.dim,
                            LinearFusion::residual);
    std::vector<float> gate_up;
    append_f32(model.layer_tensor(l, "ffn_gate"), gate_up);
    append_f32(model.layer_tensor(l, "ffn_up"), gate_up);
    layer.gate_up = build.swiglu(gate_up, c.hidden_dim, c.dim);
    layer.down = build.linear(to_f32(model.layer_tensor(l, "ffn_down")), c.dim, c.hidden_dim,
                              LinearFusion::residual);
    out.layers.push_back(std::move(layer));
  }
  const TensorView& classifier = model.classifier();
  const std::vector<float> classifier_f32 =
      classifier.name == "token_embd.weight" ? out.embedding : to_f32(classifier);
  out.classifier =
      build.linear(classifier_f32, c.vocab_size, c.dim, LinearFusion::plain, /*classifier=*/true);
  return out;
}

}  // namespace qforge
