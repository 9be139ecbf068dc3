#include "model/format/llama_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "jit/base/error.h"
#include "model/format/gguf_reader.h"

namespace qforge {

namespace {

// Upper bounds far above any real Llama, low enough that products of them fit in 64 bits
// and a corrupt header cannot ask for terabytes.
constexpr std::int64_t kMaxWidth = 1 << 16;
constexpr std::int64_t kMaxHiddenWidth = 1 << 20;
constexpr std::int64_t kMaxLayers = 1 << 10;
constexpr std::int64_t kMaxHeads = 1 << 10;
constexpr std::int64_t kMaxVocab = 1 << 24;
constexpr std::int64_t kMaxContext = 1 << 24;

void check_range(std::string_view source, std::string_view field, std::int64_t value,
                 std::int64_t max) {
  if (value <= 0) fail(source, ": ", field, " is ", value, ", expected a positive size");
  if (value > max) fail(source, ": ", field, " is ", value, ", larger than the limit ", max);
}

int gguf_size(const GgufReader& gguf, std::string_view key) {
  const std::uint64_t value = gguf.get_u64(key);
  if (value > static_cast<std::uint64_t>(kMaxVocab) * 64)
    fail(gguf.path(), ": metadata '", key, "' is ", value, ", far larger than any model");
  return static_cast<int>(value);
}

}  // namespace

#define QF_GGUF_FIELDS(arch)                                                       \
  {                                                                                \
    arch ".embedding_length", arch ".feed_forward_length", arch ".block_count",    \
        arch ".attention.head_count", arch ".attention.head_count_kv",             \
        arch ".vocab_size / tokenizer.ggml.tokens length", arch ".context_length", \
        arch ".attention.layer_norm_rms_epsilon", arch ".rope.freq_base",          \
        arch ".rope.dimension_count",                                              \
  }
const LlamaConfigFieldNames kGgufLlamaFields = QF_GGUF_FIELDS("llama");
namespace {
const LlamaConfigFieldNames kGgufMistralFields = QF_GGUF_FIELDS("mistral");
const LlamaConfigFieldNames kGgufQwen2Fields = QF_GGUF_FIELDS("qwen2");
}  // namespace
#undef QF_GGUF_FIELDS

const LlamaConfigFieldNames& gguf_field_names(std::string_view architecture) {
  if (architecture == "mistral") return kGgufMistralFields;
  if (architecture == "qwen2") return kGgufQwen2Fields;
  return kGgufLlamaFields;
}

std::string_view supported_architectures() {
  return "llama, mistral and qwen2";
}

const LlamaConfigFieldNames kLlama2cFields = {
    "header dim",        "header hidden_dim", "header n_layers", "header n_heads",
    "header n_kv_heads", "header vocab_size", "header seq_len",  "rms_eps",
    "rope_theta",        "rope_dim",
};

std::string LlamaConfig::to_string() const {
  std::ostringstream out;
  out << "dim=" << dim << " hidden_dim=" << hidden_dim << " n_layers=" << n_layers
      << " n_heads=" << n_heads << " n_kv_heads=" << n_kv_heads << " vocab_size=" << vocab_size
      << " seq_len=" << seq_len << " head_dim=" << head_dim << " rope_dim=" << rope_dim
      << " rope_theta=" << rope_theta << " rms_eps=" << rms_eps
      << " tied_embedding=" << (tied_embedding ? "yes" : "no");
  return out.str();
}

void validate_llama_config(const LlamaConfig& c, std::string_view source,
                           const LlamaConfigFieldNames& f) {
  check_range(source, f.dim, c.dim, kMaxWidth);
  check_range(source, f.hidden_dim, c.hidden_dim, kMaxHiddenWidth);
  check_range(source, f.n_layers, c.n_layers, kMaxLayers);
  check_range(source, f.n_heads, c.n_heads, kMaxHeads);
  check_range(source, f.n_kv_heads, c.n_kv_heads, kMaxHeads);
  check_range(source, f.vocab_size, c.vocab_size, kMaxVocab);
  check_range(source, f.seq_len, c.seq_len, kMaxContext);
  if (c.dim % c.n_heads != 0)
    fail(source, ": ", f.n_heads, " (", c.n_heads, ") does not divide ", f.dim, " (", c.dim, ")");
  if (c.n_heads % c.n_kv_heads != 0)
    fail(source, ": ", f.n_kv_heads, " (", c.n_kv_heads, ") does not divide ", f.n_heads, " (",
         c.n_heads, ")");
  if (c.head_dim != c.dim / c.n_heads)
    fail(source, ": head_dim ", c.head_dim, " differs from ", f.dim, " / ", f.n_heads, " = ",
         c.dim / c.n_heads);
  if (c.head_dim % 2 != 0)
    fail(source, ": head_dim ", f.dim, " / ", f.n_heads, " = ", c.head_dim,
         " is odd; RoPE rotates pairs");
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    fail(source, ": ", f.rope_dim, " is ", c.rope_dim, ", expected an even number in [2, ",
         c.head_dim, "] (head_dim)");
  if (!(c.rms_eps > 0.0f && c.rms_eps < 1.0f))
    fail(source, ": ", f.rms_eps, " is ", c.rms_eps, ", expected a small positive number");
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 0.0f))
    fail(source, ": ", f.rope_theta, " is ", c.rope_theta, ", expected a positive number");
}

LlamaConfig llama_config_from_gguf(const GgufReader& gguf) {
  const std::string& architecture = gguf.get_string("general.architecture");
  if (architecture != "llama" && architecture != "mistral" && architecture != "qwen2")
    fail(gguf.path(), ": metadata 'general.architecture' is \"", architecture, "\"; qforge runs ",
         supported_architectures());
  const std::string a = architecture + ".";
  const auto key = [&](std::string_view name) { return a + std::string(name); };

  LlamaConfig config;
  config.architecture = architecture;
  config.dim = gguf_size(gguf, key("embedding_length"));
  config.hidden_dim = gguf_size(gguf, key("feed_forward_length"));
  config.n_layers = gguf_size(gguf, key("block_count"));
  config.n_heads = gguf_size(gguf, key("attention.head_count"));
  config.n_kv_heads = gguf.has(key("attention.head_count_kv"))
                          ? gguf_size(gguf, key("attention.head_count_kv"))
                          : config.n_heads;
  config.seq_len = gguf_size(gguf, key("context_length"));
  config.rms_eps = gguf.get_f32(key("attention.layer_norm_rms_epsilon"));
  config.rope_theta = gguf.find_f32(key("rope.freq_base")).value_or(10000.0f);

  if (gguf.has(key("vocab_size"))) {
    config.vocab_size = gguf_size(gguf, key("vocab_size"));
  } else if (gguf.has("tokenizer.ggml.tokens")) {
    config.vocab_size = static_cast<int>(std::min<std::size_t>(
        gguf.get_array_size("tokenizer.ggml.tokens"), static_cast<std::size_t>(kMaxVocab) + 1));
  } else {
    config.vocab_size = static_cast<int>(std::min<std::uint64_t>(
        gguf.tensor("token_embd.weight").rows(), static_cast<std::uint64_t>(kMaxVocab) + 1));
  }
  config.tied_embedding = gguf.find_tensor("output.weight") == nullptr;
  config.qkv_bias = gguf.find_tensor("blk.0.attn_q.bias") != nullptr;

  if (config.n_heads > 0) config.head_dim = config.dim / config.n_heads;
  if (gguf.has(key("attention.key_length"))) {
    const int key_length = gguf_size(gguf, key("attention.key_length"));
    if (key_length != config.head_dim)
      fail(gguf.path(), ": metadata '", key("attention.key_length"), "' is ", key_length,
           ", but qforge needs it to equal ", key("embedding_length"), " / ",
           key("attention.head_count"), " = ", config.head_dim);
  }
  config.rope_dim = gguf.has(key("rope.dimension_count"))
                        ? gguf_size(gguf, key("rope.dimension_count"))
                        : config.head_dim;
  config.rope_style = architecture == "qwen2" ? RopeStyle::SplitHalves : RopeStyle::AdjacentPairs;

  // RoPE scaling: linear position interpolation; YaRN and the others are not run.
  const std::string scaling = gguf.find_string(key("rope.scaling.type")).value_or("none");
  if (scaling == "linear") {
    const float factor = gguf.get_f32(key("rope.scaling.factor"));
    if (!(std::isfinite(factor) && factor > 0.0f))
      fail(gguf.path(), ": metadata '", key("rope.scaling.factor"), "' is ", factor,
           ", expected a positive number");
    config.rope_freq_scale = 1.0f / factor;
  } else if (scaling != "none") {
    fail(gguf.path(), ": metadata '", key("rope.scaling.type"), "' is \"", scaling,
         "\"; qforge runs \"none\" and \"linear\" RoPE scaling");
  }
  if (const auto legacy = gguf.find_f32(key("rope.scale_linear"))) {
    if (!(std::isfinite(*legacy) && *legacy > 0.0f))
      fail(gguf.path(), ": metadata '", key("rope.scale_linear"), "' is ", *legacy,
           ", expected a positive number");
    config.rope_freq_scale = 1.0f / *legacy;
  }
  validate_llama_config(config, gguf.path(), gguf_field_names(architecture));
  return config;
}

std::vector<GgufKeyValue> llama_config_to_gguf(const LlamaConfig& c) {
  const std::string arch = c.architecture + ".";
  const auto u32 = [](int value) { return GgufValue::u32(static_cast<std::uint32_t>(value)); };
  return {{"general.architecture", GgufValue::string(c.architecture)},
          {arch + "context_length", u32(c.seq_len)},
          {arch + "embedding_length", u32(c.dim)},
          {arch + "block_count", u32(c.n_layers)},
          {arch + "feed_forward_length", u32(c.hidden_dim)},
          {arch + "attention.head_count", u32(c.n_heads)},
          {arch + "attention.head_count_kv", u32(c.n_kv_heads)},
          {arch + "attention.layer_norm_rms_epsilon", GgufValue::f32(c.rms_eps)},
          {arch + "rope.freq_base", GgufValue::f32(c.rope_theta)},
          {arch + "rope.dimension_count", u32(c.rope_dim)},
          {arch + "vocab_size", u32(c.vocab_size)}};
}

}  // namespace qforge
