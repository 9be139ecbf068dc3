// One view of a Llama model whatever file it came from: the config plus the weights under
// llama.cpp's GGUF tensor names, each pointing into the file's read-only mapping.
//
//   token_embd.weight            [vocab][dim]
//   blk.N.attn_norm.weight       [dim]                  (rows == 1)
//   blk.N.attn_q.weight          [dim][dim]             rows = out features, columns = in
//   blk.N.attn_k.weight          [kv_dim][dim]
//   blk.N.attn_v.weight          [kv_dim][dim]
//   blk.N.attn_output.weight     [dim][dim]
//   blk.N.ffn_norm.weight        [dim]
//   blk.N.ffn_gate.weight        [hidden_dim][dim]      llama2.c w1
//   blk.N.ffn_up.weight          [hidden_dim][dim]      llama2.c w3
//   blk.N.ffn_down.weight        [dim][hidden_dim]      llama2.c w2
//   output_norm.weight           [dim]
//   output.weight                [vocab][dim]           absent when tied to token_embd
//
// Q and K rows are in the order llama2.c uses (RoPE rotates adjacent pairs 2i, 2i+1);
// llama.cpp's converter stores llama-architecture GGUF files the same way.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/format/gguf_reader.h"
#include "model/format/gguf_types.h"
#include "model/format/llama2c_reader.h"
#include "model/format/llama_config.h"
#include "model/format/qforge_encoding.h"
#include "ops/quant/quantize.h"

namespace qforge {

// A weight matrix (or vector, rows == 1) inside a mapped file. `data` has no alignment
// guarantee beyond the file's; read through row_to_f32 or memcpy, not pointer casts.
struct TensorView {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::int64_t rows = 0;
  std::int64_t columns = 0;
  const std::byte* data = nullptr;
  std::uint64_t byte_size = 0;
  // Values a calibrated method replaced (ModelFile::replace_tensor): `data` is memory the
  // ModelFile owns, not file pages (which a loader may release once converted).
  bool in_memory = false;
  // Where the tensor's bytes are in the file, and their type there (what `data` held
  // before a replacement).
  std::uint64_t file_offset = 0;
  GgmlType file_type = GgmlType::F32;
  // A tensor in qforge's own GGUF encoding (model/qforge_encoding.h): `data` holds its
  // operand rows (type I8), `encoded` where its scales (and zero points) are and its
  // scheme; `byte_size` counts all three parts.
  std::shared_ptr<const EncodedTensor> encoded = nullptr;

  std::uint64_t row_bytes() const {
    return encoded ? encoded->geometry.row_bytes()
                   : ggml_row_bytes(type, static_cast<std::uint64_t>(columns));
  }
  std::span<const std::byte> row(std::int64_t index) const;
  // Decodes row `index` into `out` (columns floats).
  void row_to_f32(std::int64_t index, std::span<float> out) const;
  std::string shape_string() const;  // "[rows][columns]"
};

enum class ModelFormat { Gguf, Llama2c };

// "blk.3.attn_q.weight" for (3, "attn_q").
std::string layer_tensor_name(int layer, std::string_view role);
// "blk.3.attn_q.bias" for (3, "attn_q").
std::string layer_bias_name(int layer, std::string_view role);

// A GGUF file's static activation scales (quantize -o with --act static): one Float32
// metadata value per layer, "qforge.activation_scale.blk.3.attn_qkv" = 0.0123; read on
// open (a non-float, non-positive or unknown layer's value is refused naming the key).
inline constexpr std::string_view kActivationScaleKey = "qforge.activation_scale.";

class ModelFile {
 public:
  // Throw qforge::Error naming the file and the tensor or field at fault.
  static ModelFile from_gguf(std::string path);
  static ModelFile from_llama2c(std::string path);

  ModelFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  const LlamaConfig& config() const { return config_; }

  const std::vector<TensorView>& tensors() const { return tensors_; }
  const TensorView* find_tensor(std::string_view name) const;
  const TensorView& tensor(std::string_view name) const;  // throws if missing
  const TensorView& layer_tensor(int layer, std::string_view role) const;
  // output.weight, or token_embd.weight when the classifier is tied.
  const TensorView& classifier() const;
  // What one decode step reads of the file's own tensors: all their bytes, less the
  // token-embedding table plus one row of it (unless the classifier is that table).
  std::uint64_t bytes_per_token() const;

  // The GGUF file (metadata, tokenizer); nullptr for llama2.c checkpoints.
  const GgufReader* gguf() const { return gguf_.get(); }

  // What calibrated methods (calib/) change before the model is built:
  //   replace_tensor     new values of a tensor (SmoothQuant / AWQ fold scales into norms
  //                      and weights): rows x columns f32 of the same shape, held here
  //   set_prequantized   a tensor's quantization made elsewhere (GPTQ): a build that gives
  //                      the tensor exactly `tensor.scheme` packs these values as they are
  //                      instead of quantizing the tensor's own
  // Both throw naming the tensor when it is missing or the shape differs.
  void replace_tensor(std::string_view name, std::vector<float> values);
  // `method` names what made it ("gptq"), for the applied policy.
  void set_prequantized(std::string_view name, QuantizedTensor tensor, std::string method);
  // The prequantized form of `name` under `scheme`, or nullptr; and what made it.
  const QuantizedTensor* prequantized(std::string_view name, const QuantScheme& scheme) const;
  std::string prequantized_method(std::string_view name) const;
  bool has_prequantized() const { return !prequantized_.empty(); }
  //   set_activation_scale   static W8A8: the int8 activation scale of a linear layer's
  //                      input (its named_layers() name, "blk.3.attn_qkv"), > 0; a build
  //                      that quantizes the layer uses it instead of per-row scales
  void set_activation_scale(std::string_view layer, float scale);
  void clear_activation_scale(std::string_view layer);   // back to dynamic
  void clear_activation_scales();                        // every layer dynamic
  float activation_scale(std::string_view layer) const;  // 0: none (dynamic)
  bool has_activation_scales() const { return !activation_scales_.empty(); }
  const std::map<std::string, float, std::less<>>& activation_scales() const {
    return activation_scales_;
  }

 private:
  ModelFile() = default;
  void add(TensorView view);
  void check_shapes() const;
  // rope_freqs.weight (F32, rope_dim / 2 positive factors) into config_.rope_freq_factors.
  void read_rope_freq_factors();
  void read_activation_scales();

  ModelFormat format_ = ModelFormat::Gguf;
  std::string path_;
  LlamaConfig config_;
  std::unique_ptr<GgufReader> gguf_;
  std::unique_ptr<Llama2cCheckpoint> llama2c_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::vector<std::unique_ptr<std::vector<float>>> replaced_;  // replace_tensor's values
  struct Prequantized {
    QuantizedTensor tensor;
    std::string method;
  };
  std::map<std::string, Prequantized, std::less<>> prequantized_;
  std::map<std::string, float, std::less<>> activation_scales_;
};

// Writes `path` as a byte copy of the model's file with every replaced tensor's values in
// place of its own (via "<path>.tmp", renamed when complete): the file of a model a
// calibrated step changed. Throws naming the tensor when one was not F32 in the file.
void write_with_replacements(const ModelFile& model, const std::string& path);

// Opens a GGUF file (recognised by its magic or a .gguf name) or a llama2.c checkpoint
// (anything else whose header and size agree).
ModelFile open_model(const std::string& path);

}  // namespace qforge
