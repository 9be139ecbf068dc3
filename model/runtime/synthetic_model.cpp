#include "model/runtime/synthetic_model.h"

#include <charconv>
#include <cmath>
#include <map>
#include <vector>

#include "jit/base/error.h"
#include "model/format/gguf_writer.h"
#include "model/format/model_file.h"
#include "model/tokenizer/byte_level.h"

namespace qforge {
namespace {

constexpr float kWeightStd = 0.02f;

// splitmix64: a counter-based generator, so any row can be produced independently.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Row `row` of tensor `tensor`: normal(0, std) by Box-Muller on a per-row stream.
void normal_row(std::uint64_t seed, std::uint64_t tensor, std::uint64_t row, float* out,
                std::uint64_t columns) {
  std::uint64_t state = mix(seed ^ mix(tensor * 0x100000001b3ULL ^ mix(row)));
  const auto uniform = [&state] {
    state = mix(state);
    return (static_cast<double>(state >> 11) + 0.5) * 0x1.0p-53;  // (0, 1)
  };
  for (std::uint64_t i = 0; i < columns; i += 2) {
    const double radius = std::sqrt(-2.0 * std::log(uniform())) * kWeightStd;
    const double angle = 6.283185307179586 * uniform();
    out[i] = static_cast<float>(radius * std::cos(angle));
    if (i + 1 < columns) out[i + 1] = static_cast<float>(radius * std::sin(angle));
  }
}

LlamaConfig make_config(int dim, int hidden, int layers, int heads, int kv_heads, int vocab,
                        int context) {
  LlamaConfig c;
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.vocab_size = vocab;
  c.seq_len = context;
  c.head_dim = heads > 0 ? dim / heads : 0;
  c.rope_dim = c.head_dim;
  c.rms_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.tied_embedding = false;
  return c;
}

// Llama 3.1's RoPE frequency factors (factor 32, low 1, high 4, original context 8192):
// long wavelengths slowed by the factor, short ones kept, a smooth blend between.
std::vector<float> llama31_rope_factors(const LlamaConfig& c) {
  constexpr double kFactor = 32, kLow = 1, kHigh = 4, kOriginal = 8192;
  std::vector<float> factors;
  for (int i = 0; i < c.rope_dim; i += 2) {
    const double freq = std::pow(double(c.rope_theta), -double(i) / c.rope_dim);
    const double wavelength = 2 * 3.141592653589793 / freq;
    double factor = 1;
    if (wavelength > kOriginal / kLow) {
      factor = kFactor;
    } else if (wavelength >= kOriginal / kHigh) {
      const double smooth = (kOriginal / wavelength - kLow) / (kHigh - kLow);
      factor = 1 / ((1 - smooth) / kFactor + smooth);
    }
    factors.push_back(static_cast<float>(factor));
  }
  return factors;
}

void make_llama3(LlamaConfig& c) {
  c.rope_theta = 500000.0f;
  c.rope_freq_factors = llama31_rope_factors(c);
  c.tied_embedding = true;
}

bool strip_llama3_style(std::string& preset) {
  for (const std::string_view tag : {",style=llama3", "style=llama3,"}) {
    if (const std::size_t at = preset.find(tag); at != std::string::npos) {
      preset.erase(at, tag.size());
      return true;
    }
  }
  return false;
}

LlamaConfig parse_dims(std::string_view preset) {
  std::map<std::string, int, std::less<>> values = {{"ctx", 2048}};
  std::string_view rest = preset;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    const std::size_t equals = item.find('=');
    const std::string_view key = item.substr(0, equals);
    if (equals == std::string_view::npos ||
        !(key == "dim" || key == "hidden" || key == "layers" || key == "heads" ||
          key == "kv-heads" || key == "vocab" || key == "ctx"))
      fail("--preset '", preset, "': '", item, "' is not one of dim=, hidden=, layers=, heads=, ",
           "kv-heads=, vocab=, ctx=, style=llama3; or use a preset (", synthetic_preset_names(),
           ")");
    const std::string_view number = item.substr(equals + 1);
    int value = 0;
    const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (error != std::errc{} || end != number.data() + number.size() || value <= 0)
      fail("--preset '", preset, "': ", key, " = '", number, "' is not a positive integer");
    values[std::string(key)] = value;
  }
  for (const char* key : {"dim", "hidden", "layers", "heads", "vocab"})
    if (!values.count(key)) fail("--preset '", preset, "': ", key, "= is missing");
  const int heads = values["heads"];
  const int kv_heads = values.count("kv-heads") ? values["kv-heads"] : heads;
  return make_config(values["dim"], values["hidden"], values["layers"], heads, kv_heads,
                     values["vocab"], values["ctx"]);
}

std::vector<std::string> placeholder_vocabulary(int size, std::vector<std::int32_t>& types) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  types = {2, 3, 3};  // unknown, control, control
  static const char kHex[] = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    tokens.push_back(std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">");
    types.push_back(6);  // byte
  }
  for (int id = static_cast<int>(tokens.size()); id < size; ++id) {
    tokens.push_back("\xE2\x96\x81t" + std::to_string(id));
    types.push_back(1);  // normal
  }
  tokens.resize(static_cast<std::size_t>(size));
  types.resize(static_cast<std::size_t>(size));
  return tokens;
}

// Llama 3's vocabulary layout without its merges: the 256 bytes in GPT-2's byte-level
// alphabet, unused padding, then the 256 special tokens.
std::vector<std::string> llama3_vocabulary(int size, std::vector<std::int32_t>& types) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(to_byte_level(std::string(1, static_cast<char>(b))));
    types.push_back(1);  // normal
  }
  const int first_special = size - 256;
  for (int id = 256; id < first_special; ++id) {
    tokens.push_back("[PAD" + std::to_string(id) + "]");
    types.push_back(5);  // unused
  }
  const char* named[] = {"<|begin_of_text|>",
                         "<|end_of_text|>",
                         "<|reserved_special_token_0|>",
                         "<|reserved_special_token_1|>",
                         "<|finetune_right_pad_id|>",
                         "<|reserved_special_token_2|>",
                         "<|start_header_id|>",
                         "<|end_header_id|>",
                         "<|eom_id|>",
                         "<|eot_id|>",
                         "<|python_tag|>"};
  int reserved = 3;
  for (int i = 0; i < 256; ++i) {
    tokens.push_back(i < 11 ? std::string(named[i])
                            : "<|reserved_special_token_" + std::to_string(reserved++) + "|>");
    types.push_back(3);  // control
  }
  return tokens;
}

// The core of Llama 3's chat template (what chat_format recognises it by).
constexpr const char* kLlama3ChatTemplate =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}";

}  // namespace

std::string synthetic_preset_names() {
  return "tinyllama-1.1b, llama2-7b, llama3.2-1b, llama3-8b, stories260k";
}

SyntheticModelSpec synthetic_spec(std::string_view preset) {
  SyntheticModelSpec spec;
  LlamaConfig& config = spec.config;
  std::string dims(preset);
  bool llama3 = false;
  if (preset == "tinyllama-1.1b") {
    config = make_config(2048, 5632, 22, 32, 4, 32000, 2048);
  } else if (preset == "llama2-7b") {
    config = make_config(4096, 11008, 32, 32, 32, 32000, 4096);
  } else if (preset == "llama3.2-1b") {
    config = make_config(2048, 8192, 16, 32, 8, 128256, 131072);
    llama3 = true;
  } else if (preset == "llama3-8b") {
    config = make_config(4096, 14336, 32, 32, 8, 128256, 8192);
    llama3 = true;
  } else if (preset == "stories260k") {
    config = make_config(64, 172, 5, 8, 4, 512, 512);
  } else {
    llama3 = strip_llama3_style(dims);
    config = parse_dims(dims);
  }
  if (llama3) {
    make_llama3(config);
    spec.style = SyntheticStyle::Llama3;
  }
  validate_llama_config(config, "--preset '" + std::string(preset) + "'", kGgufLlamaFields);
  return spec;
}

LlamaConfig synthetic_preset(std::string_view preset) {
  return synthetic_spec(preset).config;
}

GgmlType parse_synthetic_type(std::string_view type) {
  if (type == "f32") return GgmlType::F32;
  if (type == "f16") return GgmlType::F16;
  if (type == "bf16") return GgmlType::BF16;
  if (type == "q8_0") return GgmlType::Q8_0;
  if (type == "q4_0") return GgmlType::Q4_0;
  if (type == "q4_1") return GgmlType::Q4_1;
  fail("--type '", type, "' is not one of f32, f16, bf16, q8_0, q4_0, q4_1");
}

void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path) {
  const LlamaConfig& c = spec.config;
  validate_llama_config(c, path, kGgufLlamaFields);
  if (spec.type != GgmlType::F32 && spec.type != GgmlType::F16 && spec.type != GgmlType::BF16 &&
      (c.dim % 32 != 0 || c.hidden_dim % 32 != 0))
    fail(path, ": ", ggml_type_name(spec.type), " needs dim and hidden multiples of 32 (dim ",
         c.dim, ", hidden ", c.hidden_dim, ")");
  const bool llama3 = spec.style == SyntheticStyle::Llama3;
  if (c.vocab_size < (llama3 ? 512 : 259))
    fail(path, ": vocab ", c.vocab_size, " is below the ", llama3 ? 512 : 259, " base tokens");

  GgufWriter writer;
  const auto u32 = [](int value) { return GgufValue::u32(static_cast<std::uint32_t>(value)); };
  writer.add("general.name", GgufValue::string(spec.name));
  for (GgufKeyValue& kv : llama_config_to_gguf(c))
    writer.add(std::move(kv.key), std::move(kv.value));
  std::vector<std::int32_t> types;
  if (llama3) {
    const std::vector<std::string> tokens = llama3_vocabulary(c.vocab_size, types);
    const int first_special = c.vocab_size - 256;
    writer.add("tokenizer.ggml.model", GgufValue::string("gpt2"));
    writer.add("tokenizer.ggml.pre", GgufValue::string("llama-bpe"));
    writer.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
    writer.add("tokenizer.ggml.token_type", GgufValue::i32_array(types));
    writer.add("tokenizer.ggml.merges", GgufValue::string_array({}));
    writer.add("tokenizer.ggml.bos_token_id", u32(first_special));
    writer.add("tokenizer.ggml.eos_token_id", u32(first_special + 1));
    writer.add("tokenizer.ggml.eot_token_id", u32(first_special + 9));
    writer.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
    writer.add("tokenizer.chat_template", GgufValue::string(kLlama3ChatTemplate));
  } else {
    const std::vector<std::string> tokens = placeholder_vocabulary(c.vocab_size, types);
    writer.add("tokenizer.ggml.model", GgufValue::string("llama"));
    writer.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
    writer.add("tokenizer.ggml.scores",
               GgufValue::f32_array(std::vector<float>(tokens.size(), 0.0f)));
    writer.add("tokenizer.ggml.token_type", GgufValue::i32_array(types));
    writer.add("tokenizer.ggml.bos_token_id", u32(1));
    writer.add("tokenizer.ggml.eos_token_id", u32(2));
    writer.add("tokenizer.ggml.unknown_token_id", u32(0));
  }

  std::uint64_t tensor_id = 0;
  const auto matrix = [&](const std::string& name, int rows, int columns) {
    const std::uint64_t id = tensor_id++;
    const std::uint64_t seed = spec.seed;
    const auto width = static_cast<std::uint64_t>(columns);
    writer.add_tensor_streamed(
        name, spec.type, {width, static_cast<std::uint64_t>(rows)},
        [seed, id, width](std::uint64_t first, std::uint64_t count, float* out) {
          for (std::uint64_t r = 0; r < count; ++r)
            normal_row(seed, id, first + r, out + r * width, width);
        });
  };
  const auto norm = [&](const std::string& name) {
    ++tensor_id;
    writer.add_tensor_from_f32(name, GgmlType::F32, {static_cast<std::uint64_t>(c.dim)},
                               std::vector<float>(static_cast<std::size_t>(c.dim), 1.0f));
  };
  matrix("token_embd.weight", c.vocab_size, c.dim);
  for (int l = 0; l < c.n_layers; ++l) {
    norm(layer_tensor_name(l, "attn_norm"));
    matrix(layer_tensor_name(l, "attn_q"), c.dim, c.dim);
    matrix(layer_tensor_name(l, "attn_k"), c.kv_dim(), c.dim);
    matrix(layer_tensor_name(l, "attn_v"), c.kv_dim(), c.dim);
    matrix(layer_tensor_name(l, "attn_output"), c.dim, c.dim);
    norm(layer_tensor_name(l, "ffn_norm"));
    matrix(layer_tensor_name(l, "ffn_gate"), c.hidden_dim, c.dim);
    matrix(layer_tensor_name(l, "ffn_up"), c.hidden_dim, c.dim);
    matrix(layer_tensor_name(l, "ffn_down"), c.dim, c.hidden_dim);
  }
  norm("output_norm.weight");
  if (!c.tied_embedding) matrix("output.weight", c.vocab_size, c.dim);
  if (!c.rope_freq_factors.empty())
    writer.add_tensor_from_f32("rope_freqs.weight", GgmlType::F32,
                               {static_cast<std::uint64_t>(c.rope_freq_factors.size())},
                               c.rope_freq_factors);
  writer.write(path);
}

}  // namespace qforge
