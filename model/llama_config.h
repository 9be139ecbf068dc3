// The hyper-parameters of a Llama-style model, from GGUF metadata or a llama2.c header,
// and the checks that make them safe to size buffers with.
#pragma once

#include <string>
#include <string_view>

namespace qforge {

class GgufReader;

struct LlamaConfig {
  int dim = 0;         // model width (embedding length)
  int hidden_dim = 0;  // feed-forward inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;  // context length
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int rope_dim = 0;            // dimensions rotated per head, adjacent pairs (2i, 2i+1)
  int head_dim = 0;            // dim / n_heads
  bool tied_embedding = true;  // the classifier reuses token_embd.weight

  int kv_dim() const { return n_kv_heads * head_dim; }
  int kv_group() const { return n_heads / n_kv_heads; }  // query heads per kv head

  std::string to_string() const;
};

// Where each field came from, for error messages: llama.cpp keys or llama2.c header names.
struct LlamaConfigFieldNames {
  std::string_view dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, rms_eps,
      rope_theta, rope_dim;
};
extern const LlamaConfigFieldNames kGgufLlamaFields;
extern const LlamaConfigFieldNames kLlama2cFields;

// Throws qforge::Error "<source>: <field> ..." if a size is not positive, too large to be
// a real model, or inconsistent (n_heads must divide dim, n_kv_heads must divide n_heads,
// head_dim and rope_dim must be even, ...).
void validate_llama_config(const LlamaConfig& config, std::string_view source,
                           const LlamaConfigFieldNames& fields);

// Reads general.architecture (must be "llama") and the llama.* keys; vocab_size comes from
// llama.vocab_size, else the length of tokenizer.ggml.tokens, else token_embd.weight rows;
// tied_embedding is true when the file has no output.weight. The result is validated.
LlamaConfig llama_config_from_gguf(const GgufReader& gguf);

}  // namespace qforge
