// The hyper-parameters of a Llama-style model, from GGUF metadata or a llama2.c header,
// and the checks that make them safe to size buffers with.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/format/gguf_types.h"

namespace qforge {

class GgufReader;

// Which elements of a head RoPE rotates together (for pair p < rope_dim / 2):
//   AdjacentPairs (2p, 2p+1)             llama / mistral GGUF (the converter permutes Q, K)
//   SplitHalves   (p, p + rope_dim / 2)  qwen2 (GPT-NeoX's layout)
enum class RopeStyle { AdjacentPairs, SplitHalves };

struct LlamaConfig {
  std::string architecture = "llama";  // general.architecture: llama, mistral or qwen2
  int dim = 0;                         // model width (embedding length)
  int hidden_dim = 0;                  // feed-forward inner width
  int n_layers = 0;
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;  // context length
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int rope_dim = 0;  // dimensions rotated per head (partial rotary when < head_dim)
  RopeStyle rope_style = RopeStyle::AdjacentPairs;
  // Pair p of position pos turns by pos * rope_freq_scale * theta^(-2p / rope_dim) / factor[p]:
  // rope_freq_scale = 1 / <arch>.rope.scaling.factor for linear scaling, the factors from
  // the rope_freqs.weight tensor (Llama 3.1's frequency scaling), empty for none.
  float rope_freq_scale = 1.0f;
  std::vector<float> rope_freq_factors;
  int head_dim = 0;            // dim / n_heads
  bool tied_embedding = true;  // the classifier reuses token_embd.weight
  bool qkv_bias = false;       // blk.N.attn_{q,k,v}.bias added after the projection (qwen2)

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
// The GGUF keys of an architecture's fields ("qwen2.embedding_length", ...); llama's for
// an architecture qforge does not run.
const LlamaConfigFieldNames& gguf_field_names(std::string_view architecture);
// The architectures llama_config_from_gguf accepts, for messages.
std::string_view supported_architectures();

// Throws qforge::Error "<source>: <field> ..." if a size is not positive, too large to be
// a real model, or inconsistent (n_heads must divide dim, n_kv_heads must divide n_heads,
// head_dim and rope_dim must be even, ...).
void validate_llama_config(const LlamaConfig& config, std::string_view source,
                           const LlamaConfigFieldNames& fields);

// Reads general.architecture (llama, mistral or qwen2) and that architecture's keys
// (<arch>.embedding_length, ...); vocab_size comes from <arch>.vocab_size, else the length
// of tokenizer.ggml.tokens, else token_embd.weight rows; tied_embedding is true when the
// file has no output.weight; qkv_bias when it has blk.0.attn_q.bias; the RoPE scaling from
// <arch>.rope.scaling.type / .factor ("none" or "linear"; others are refused naming the
// key) and the rope_freqs.weight tensor. The result is validated.
LlamaConfig llama_config_from_gguf(const GgufReader& gguf);

// The inverse for a plain Llama config (no RoPE scaling, no biases): general.architecture
// and the <arch>.* keys above (context_length, embedding_length, block_count,
// feed_forward_length, attention.head_count / head_count_kv / layer_norm_rms_epsilon,
// rope.freq_base / dimension_count, vocab_size).
std::vector<GgufKeyValue> llama_config_to_gguf(const LlamaConfig& config);

}  // namespace qforge
