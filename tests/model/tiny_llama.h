// A tiny Llama GGUF built with GgufWriter, with switches that break one thing at a time.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/format/gguf_writer.h"
#include "model/format/model_file.h"

namespace qforge::test {

struct TinyLlama {
  // dim 32 keeps every matrix a whole number of 32-value blocks.
  int dim = 32, hidden_dim = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, vocab = 40,
      context = 16;
  GgmlType matrix_type = GgmlType::F32;
  std::string architecture = "llama";
  bool with_output = true;
  int token_count = -1;           // tokenizer.ggml.tokens length; -1: vocab
  bool qkv_bias = false;          // blk.N.attn_{q,k,v}.bias (as qwen2 files have)
  std::vector<float> rope_freqs;  // written as rope_freqs.weight when not empty
  // Called with each tensor's name and (rows, columns); may change them or return false to
  // leave the tensor out.
  std::function<bool(const std::string&, std::int64_t&, std::int64_t&)> edit_tensor;
  // Called before writing, to add or override metadata.
  std::function<void(GgufWriter&)> edit_metadata;
};

// Weights are deterministic pseudo-random values in [-1, 1]; returns them by name.
inline std::map<std::string, std::vector<float>> write_tiny_llama(const std::string& path,
                                                                  const TinyLlama& m) {
  GgufWriter writer;
  writer.add("general.architecture", GgufValue::string(m.architecture));
  const std::string arch = m.architecture;
  writer.add(arch + ".context_length", GgufValue::u32(static_cast<std::uint32_t>(m.context)));
  writer.add(arch + ".embedding_length", GgufValue::u32(static_cast<std::uint32_t>(m.dim)));
  writer.add(arch + ".block_count", GgufValue::u32(static_cast<std::uint32_t>(m.n_layers)));
  writer.add(arch + ".feed_forward_length",
             GgufValue::u32(static_cast<std::uint32_t>(m.hidden_dim)));
  writer.add(arch + ".attention.head_count", GgufValue::u32(static_cast<std::uint32_t>(m.n_heads)));
  writer.add(arch + ".attention.head_count_kv",
             GgufValue::u32(static_cast<std::uint32_t>(m.n_kv_heads)));
  writer.add(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(1e-6f));
  writer.add(arch + ".rope.freq_base", GgufValue::f32(500000.0f));
  writer.add("tokenizer.ggml.model", GgufValue::string("llama"));
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  const int token_count = m.token_count < 0 ? m.vocab : m.token_count;
  for (int i = 3; i < token_count; ++i)
    tokens.push_back(std::string(1, static_cast<char>('a' + i % 26)) + std::to_string(i));
  tokens.resize(static_cast<std::size_t>(token_count));
  writer.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  if (m.edit_metadata) m.edit_metadata(writer);

  const int head_dim = m.dim / m.n_heads;
  const int kv_dim = head_dim * m.n_kv_heads;
  struct Spec {
    std::string name;
    std::int64_t rows, columns;
    bool matrix;
  };
  std::vector<Spec> specs = {{"token_embd.weight", m.vocab, m.dim, true}};
  for (int l = 0; l < m.n_layers; ++l) {
    specs.push_back({layer_tensor_name(l, "attn_norm"), 1, m.dim, false});
    specs.push_back({layer_tensor_name(l, "attn_q"), m.dim, m.dim, true});
    specs.push_back({layer_tensor_name(l, "attn_k"), kv_dim, m.dim, true});
    specs.push_back({layer_tensor_name(l, "attn_v"), kv_dim, m.dim, true});
    if (m.qkv_bias) {
      specs.push_back({layer_bias_name(l, "attn_q"), 1, m.dim, false});
      specs.push_back({layer_bias_name(l, "attn_k"), 1, kv_dim, false});
      specs.push_back({layer_bias_name(l, "attn_v"), 1, kv_dim, false});
    }
    specs.push_back({layer_tensor_name(l, "attn_output"), m.dim, m.dim, true});
    specs.push_back({layer_tensor_name(l, "ffn_norm"), 1, m.dim, false});
    specs.push_back({layer_tensor_name(l, "ffn_gate"), m.hidden_dim, m.dim, true});
    specs.push_back({layer_tensor_name(l, "ffn_up"), m.hidden_dim, m.dim, true});
    specs.push_back({layer_tensor_name(l, "ffn_down"), m.dim, m.hidden_dim, true});
  }
  specs.push_back({"output_norm.weight", 1, m.dim, false});
  if (m.with_output) specs.push_back({"output.weight", m.vocab, m.dim, true});

  std::map<std::string, std::vector<float>> weights;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (Spec& spec : specs) {
    if (m.edit_tensor && !m.edit_tensor(spec.name, spec.rows, spec.columns)) continue;
    std::vector<float> values(static_cast<std::size_t>(spec.rows * spec.columns));
    for (float& v : values) v = uniform(rng);
    std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(spec.columns)};
    if (spec.matrix || spec.rows != 1) dims.push_back(static_cast<std::uint64_t>(spec.rows));
    writer.add_tensor_from_f32(spec.name, spec.matrix ? m.matrix_type : GgmlType::F32, dims,
                               values);
    weights[spec.name] = std::move(values);
  }
  if (!m.rope_freqs.empty()) {
    writer.add_tensor_from_f32("rope_freqs.weight", GgmlType::F32, {m.rope_freqs.size()},
                               m.rope_freqs);
    weights["rope_freqs.weight"] = m.rope_freqs;
  }
  writer.write(path);
  return weights;
}

}  // namespace qforge::test
