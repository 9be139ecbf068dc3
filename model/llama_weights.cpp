#include "model/llama_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "model/dense_linear.h"
#include "model/ggml_repack.h"
#include "model/jit_linear.h"
#include "ops/quant/pack.h"

namespace qforge {
namespace {

// All rows of `tensor` as row-major f32, appended to `out` (rows converted in parallel).
void append_f32(const TensorView& tensor, std::vector<float>& out, int threads = 1) {
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(tensor.rows * tensor.columns));
  parallel_for(tensor.rows, tensor.rows * tensor.columns >= (1 << 20) ? threads : 1,
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t r = begin; r < end; ++r)
                   tensor.row_to_f32(r, std::span<float>(out.data() + start + r * tensor.columns,
                                                         static_cast<std::size_t>(tensor.columns)));
               });
}

std::vector<float> to_f32(const TensorView& tensor, int threads = 1) {
  std::vector<float> out;
  append_f32(tensor, out, threads);
  return out;
}

const QuantScheme kPerChannelInt8{};

// The source tensors of one linear layer, stacked by rows (q|k|v) or paired (gate, up).
using Sources = std::vector<const TensorView*>;

bool all_native(const Sources& tensors) {
  for (const TensorView* t : tensors)
    if (!native_scheme(t->type) || t->type != tensors[0]->type) return false;
  return true;
}

// The rows of `tensors` stacked, as f32, in `out` (reused across layers: its pages are
// faulted in once, not once per tensor).
const std::vector<float>& stacked_f32(const Sources& tensors, int threads,
                                      std::vector<float>& out) {
  out.clear();
  for (const TensorView* t : tensors) append_f32(*t, out, threads);
  return out;
}

// Lets the kernel drop the file pages wholly inside [data, data + bytes): a tensor (or
// rows of it) already converted, so a model's file and its packed copy are not both
// resident (peak RSS stays near the packed size). Reading them again refaults them.
void release_range(const std::byte* data, std::uint64_t bytes) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void release_pages(const TensorView& tensor) {
  release_range(tensor.data, tensor.byte_size);
}

// After rows [first, first + count) of `tensor` are converted: releases the whole MiB
// windows of the tensor's bytes (counted from its start) that those rows complete, and
// the rest of the tensor at its last row. Once per MiB, not per call: each madvise
// shoots down the TLBs of every loading thread. ggml rows are whole blocks, so a row is
// byte_size / rows bytes.
void release_completed_windows(const TensorView& tensor, std::int64_t first, std::int64_t count) {
  if (tensor.rows <= 0) return;
  constexpr std::uint64_t kWindow = std::uint64_t{1} << 20;
  const std::uint64_t row_bytes = tensor.byte_size / static_cast<std::uint64_t>(tensor.rows);
  const std::uint64_t begin = static_cast<std::uint64_t>(first) * row_bytes;
  const std::uint64_t end = static_cast<std::uint64_t>(first + count) * row_bytes;
  const std::uint64_t lo = begin / kWindow * kWindow;
  const std::uint64_t hi = first + count == tensor.rows ? end : end / kWindow * kWindow;
  if (hi > lo) release_range(tensor.data + lo, hi - lo);
}

// Rows [first, first + count) of `tensors` stacked, as f32, for pack_weights_by_rows
// (which calls it from its threads); the file pages of rows converted are released as
// it goes.
RowSource stacked_rows(const Sources& tensors) {
  return [tensors](std::int64_t first, std::int64_t count, float* out) {
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t row = first + i;
      std::size_t t = 0;
      while (row >= tensors[t]->rows) row -= tensors[t++]->rows;
      const auto columns = static_cast<std::size_t>(tensors[t]->columns);
      tensors[t]->row_to_f32(row, std::span<float>(out + i * columns, columns));
    }
    std::int64_t row = first, left = count;
    for (const TensorView* t : tensors) {
      if (row >= t->rows) {
        row -= t->rows;
        continue;
      }
      const std::int64_t here = std::min(left, t->rows - row);
      release_completed_windows(*t, row, here);
      left -= here;
      row = 0;
      if (left == 0) break;
    }
  };
}

class LayerBuilder {
 public:
  LayerBuilder(const Precision& precision, int threads)
      : precision_(precision), threads_(threads) {}

  // A plain or residual layer whose rows are the rows of `tensors`, stacked. The
  // tensors' file pages are released once converted.
  std::unique_ptr<LinearLayer> linear(const Sources& tensors, LinearFusion fusion,
                                      bool classifier = false) const {
    std::unique_ptr<LinearLayer> layer = convert(tensors, fusion, classifier);
    for (const TensorView* t : tensors) release_pages(*t);
    return layer;
  }

  // The fused gate/up layer.
  std::unique_ptr<LinearLayer> swiglu(const TensorView& gate, const TensorView& up) const {
    std::unique_ptr<LinearLayer> layer = convert_pair(gate, up);
    release_pages(gate);
    release_pages(up);
    return layer;
  }

  // Frees the f32 conversion buffer.
  void release_scratch() const { std::vector<float>().swap(scratch_); }

 private:
  std::unique_ptr<LinearLayer> convert(const Sources& tensors, LinearFusion fusion,
                                       bool classifier) const {
    const std::int64_t k = tensors[0]->columns;
    std::int64_t n = 0;
    for (const TensorView* t : tensors) n += t->rows;
    const bool dense = !precision_.quantized || (classifier && precision_.lm_head_dense);
    // A native run keeps the file's classifier too, unless --lm-head int8 asks otherwise.
    const bool native = precision_.native && !(classifier && precision_.lm_head_int8);
    if (!dense && native && all_native(tensors))
      return std::make_unique<JitLinear>(pack_quantized(native_quantized(tensors), threads_),
                                         fusion);
    const QuantScheme scheme = classifier ? kPerChannelInt8 : precision_.scheme;
    if (!dense && scheme.granularity != Granularity::per_tensor)
      return std::make_unique<JitLinear>(
          pack_weights_by_rows(n, k, scheme, stacked_rows(tensors), threads_), fusion);
    const std::vector<float>& w = stacked_f32(tensors, threads_, scratch_);
    if (dense) return std::make_unique<DenseLinear>(w.data(), n, k, fusion, dense_bf16());
    return std::make_unique<JitLinear>(pack_weights(w.data(), n, k, scheme, threads_), fusion);
  }

  std::unique_ptr<LinearLayer> convert_pair(const TensorView& gate, const TensorView& up) const {
    const std::int64_t hidden = gate.rows, k = gate.columns;
    if (precision_.quantized && precision_.native && all_native({&gate, &up})) {
      const TensorView* g[] = {&gate};
      const TensorView* u[] = {&up};
      return std::make_unique<JitLinear>(
          pack_quantized_pair(native_quantized(g), native_quantized(u), threads_),
          LinearFusion::swiglu);
    }
    const QuantScheme scheme = precision_.scheme;
    if (precision_.quantized && scheme.granularity != Granularity::per_tensor)
      return std::make_unique<JitLinear>(
          pack_swiglu_pair_by_rows(hidden, k, scheme, stacked_rows({&gate}), stacked_rows({&up}),
                                   threads_),
          LinearFusion::swiglu);
    const std::vector<float>& gate_up = stacked_f32({&gate, &up}, threads_, scratch_);
    if (!precision_.quantized)
      return std::make_unique<DenseLinear>(gate_up.data(), hidden, k, LinearFusion::swiglu,
                                           dense_bf16());
    const float* g = gate_up.data();
    return std::make_unique<JitLinear>(
        pack_swiglu_pair(g, g + hidden * k, hidden, k, scheme, threads_), LinearFusion::swiglu);
  }

  bool dense_bf16() const { return precision_.dense == DenseType::bf16; }

  const Precision& precision_;
  int threads_;
  mutable std::vector<float> scratch_;  // f32 rows of the layer being converted
};

}  // namespace

Precision parse_precision(std::string_view quant, std::string_view lm_head) {
  Precision precision;
  if (quant == "f32" || quant == "bf16") {
    precision.quantized = false;
    precision.dense = quant == "bf16" ? DenseType::bf16 : DenseType::f32;
  } else if (quant.empty() || quant == "native") {
    precision.native = true;  // tensors without a native form get int8 per-channel
  } else {
    try {
      precision.scheme = parse_quant_scheme(quant, "--quant");
    } catch (const Error& e) {
      fail(e.what(), "; or f32, bf16, native");
    }
    validate(precision.scheme);
  }
  if (lm_head == "f32" || lm_head == "bf16") {
    if (precision.quantized) {
      precision.lm_head_dense = true;
      precision.dense = lm_head == "bf16" ? DenseType::bf16 : DenseType::f32;
    }
  } else {
    QF_REQUIRE(lm_head.empty() || lm_head == "int8", "--lm-head: '", lm_head,
               "' is not one of int8, f32, bf16");
    precision.lm_head_int8 = lm_head == "int8";
  }
  return precision;
}

std::string to_string(const Precision& precision) {
  const char* dense = precision.dense == DenseType::bf16 ? "bf16" : "f32";
  if (!precision.quantized) return dense;
  std::string out = precision.native
                        ? "native (Q8_0/Q4_0/Q4_1 kept; else " + to_string(precision.scheme) + ")"
                        : to_string(precision.scheme);
  if (precision.lm_head_dense) out += std::string(" (lm-head ") + dense + ")";
  return out;
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

std::vector<std::pair<std::string, const LinearLayer*>> LlamaWeights::named_layers() const {
  std::vector<std::pair<std::string, const LinearLayer*>> out;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    out.emplace_back(prefix + "attn_qkv", layers[l].wqkv.get());
    out.emplace_back(prefix + "attn_output", layers[l].wo.get());
    out.emplace_back(prefix + "ffn_gate_up", layers[l].gate_up.get());
    out.emplace_back(prefix + "ffn_down", layers[l].down.get());
  }
  out.emplace_back("output", classifier.get());
  return out;
}

std::uint64_t LlamaWeights::weight_bytes() const {
  std::uint64_t bytes = embedding.bytes() + output_norm.size() * sizeof(float);
  for (const LayerWeights& layer : layers) {
    bytes += (layer.attn_norm.size() + layer.ffn_norm.size()) * sizeof(float);
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down})
      bytes += (*linear)->weight_bytes();
  }
  return bytes + classifier->weight_bytes();
}

std::uint64_t LlamaWeights::decode_bytes_per_token() const {
  return weight_bytes() - embedding.bytes() + embedding.row_bytes();
}

std::uint64_t LlamaWeights::linear_parameters() const {
  std::uint64_t params = 0;
  auto add = [&](const LinearLayer& l) {
    const std::uint64_t outputs = l.n() * (l.fusion() == LinearFusion::swiglu ? 2 : 1);
    params += outputs * std::uint64_t(l.k());
  };
  for (const LayerWeights& layer : layers)
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down}) add(**linear);
  add(*classifier);
  return params;
}

LlamaWeights build_llama_weights(const ModelFile& model, const Precision& precision, int threads,
                                 const LoadProgress& progress) {
  if (threads <= 0) threads = default_load_threads();
  const LlamaConfig& c = model.config();
  LlamaWeights out;
  out.config = c;
  out.precision = precision;
  // The embedding first: a quantized model keeps int8 rows, so the f32 copy goes now.
  const TensorView& embedding = model.tensor("token_embd.weight");
  if (precision.quantized && precision.native && all_native({&embedding}))
    out.embedding = EmbeddingTable::file_rows(
        embedding.type, std::span(embedding.data, embedding.byte_size), c.vocab_size, c.dim);
  else
    out.embedding = precision.quantized
                        ? EmbeddingTable::int8_from_rows(c.vocab_size, c.dim,
                                                         stacked_rows({&embedding}), threads)
                        : EmbeddingTable(to_f32(embedding, threads), c.vocab_size, c.dim, false);
  release_pages(model.tensor("token_embd.weight"));
  out.output_norm = to_f32(model.tensor("output_norm.weight"));
  const LayerBuilder build(precision, threads);
  for (int l = 0; l < c.n_layers; ++l) {
    const auto tensor = [&](const char* role) { return &model.layer_tensor(l, role); };
    LayerWeights layer;
    layer.attn_norm = to_f32(*tensor("attn_norm"));
    layer.ffn_norm = to_f32(*tensor("ffn_norm"));
    layer.wqkv =
        build.linear({tensor("attn_q"), tensor("attn_k"), tensor("attn_v")}, LinearFusion::plain);
    layer.wo = build.linear({tensor("attn_output")}, LinearFusion::residual);
    layer.gate_up = build.swiglu(*tensor("ffn_gate"), *tensor("ffn_up"));
    layer.down = build.linear({tensor("ffn_down")}, LinearFusion::residual);
    for (const char* role :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      release_pages(*tensor(role));
    out.layers.push_back(std::move(layer));
    if (progress) progress(l + 1, c.n_layers + 1);
  }
  const TensorView& classifier = model.classifier();
  build.release_scratch();
  out.classifier = build.linear({&classifier}, LinearFusion::plain, /*classifier=*/true);
  if (progress) progress(c.n_layers + 1, c.n_layers + 1);
  release_pages(model.tensor("token_embd.weight"));
  return out;
}

}  // namespace qforge
