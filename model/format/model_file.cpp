#include "model/format/model_file.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "jit/base/error.h"
#include "model/format/ggml_quants.h"

namespace qforge {

namespace {

// llama2.c field name -> GGUF role inside a block ("blk.N.<role>.weight").
struct RoleName {
  std::string_view llama2c;
  std::string_view gguf_role;
};
constexpr RoleName kLayerRoles[] = {
    {"rms_att_weight", "attn_norm"},
    {"wq", "attn_q"},
    {"wk", "attn_k"},
    {"wv", "attn_v"},
    {"wo", "attn_output"},
    {"rms_ffn_weight", "ffn_norm"},
    {"w1", "ffn_gate"},
    {"w2", "ffn_down"},
    {"w3", "ffn_up"},
};

std::string gguf_name_of(const Llama2cTensor& tensor) {
  if (tensor.name == "token_embedding_table") return "token_embd.weight";
  if (tensor.name == "rms_final_weight") return "output_norm.weight";
  if (tensor.name == "wcls") return "output.weight";
  for (const RoleName& role : kLayerRoles) {
    if (tensor.name == role.llama2c) return layer_tensor_name(tensor.layer, role.gguf_role);
  }
  return {};  // freq_cis tables: not model weights
}

struct ExpectedShape {
  std::string name;
  std::int64_t rows;
  std::int64_t columns;
};

std::vector<ExpectedShape> expected_shapes(const LlamaConfig& c) {
  std::vector<ExpectedShape> shapes = {{"token_embd.weight", c.vocab_size, c.dim}};
  for (int layer = 0; layer < c.n_layers; ++layer) {
    shapes.push_back({layer_tensor_name(layer, "attn_norm"), 1, c.dim});
    shapes.push_back({layer_tensor_name(layer, "attn_q"), c.dim, c.dim});
    shapes.push_back({layer_tensor_name(layer, "attn_k"), c.kv_dim(), c.dim});
    shapes.push_back({layer_tensor_name(layer, "attn_v"), c.kv_dim(), c.dim});
    if (c.qkv_bias) {
      shapes.push_back({layer_bias_name(layer, "attn_q"), 1, c.dim});
      shapes.push_back({layer_bias_name(layer, "attn_k"), 1, c.kv_dim()});
      shapes.push_back({layer_bias_name(layer, "attn_v"), 1, c.kv_dim()});
    }
    shapes.push_back({layer_tensor_name(layer, "attn_output"), c.dim, c.dim});
    shapes.push_back({layer_tensor_name(layer, "ffn_norm"), 1, c.dim});
    shapes.push_back({layer_tensor_name(layer, "ffn_gate"), c.hidden_dim, c.dim});
    shapes.push_back({layer_tensor_name(layer, "ffn_up"), c.hidden_dim, c.dim});
    shapes.push_back({layer_tensor_name(layer, "ffn_down"), c.dim, c.hidden_dim});
  }
  shapes.push_back({"output_norm.weight", 1, c.dim});
  if (!c.tied_embedding) shapes.push_back({"output.weight", c.vocab_size, c.dim});
  return shapes;
}

std::string shape_text(std::int64_t rows, std::int64_t columns) {
  return "[" + std::to_string(rows) + "][" + std::to_string(columns) + "]";
}

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 4> magic{};
  return in.read(magic.data(), magic.size()) && std::memcmp(magic.data(), "GGUF", 4) == 0;
}

}  // namespace

std::string layer_tensor_name(int layer, std::string_view role) {
  return "blk." + std::to_string(layer) + "." + std::string(role) + ".weight";
}

std::string layer_bias_name(int layer, std::string_view role) {
  return "blk." + std::to_string(layer) + "." + std::string(role) + ".bias";
}

std::span<const std::byte> TensorView::row(std::int64_t index) const {
  if (index < 0 || index >= rows)
    fail("tensor '", name, "': row ", index, " is outside [0, ", rows, ")");
  const std::uint64_t bytes = row_bytes();
  return {data + static_cast<std::uint64_t>(index) * bytes, static_cast<std::size_t>(bytes)};
}

void TensorView::row_to_f32(std::int64_t index, std::span<float> out) const {
  if (static_cast<std::int64_t>(out.size()) != columns)
    fail("tensor '", name, "': row_to_f32 needs ", columns, " floats, got ", out.size());
  if (encoded) {
    if (index < 0 || index >= rows)
      fail("tensor '", name, "': row ", index, " is outside [0, ", rows, ")");
    return decode_encoded_row(*encoded, index, out);
  }
  dequantize_row(type, row(index), out);
}

std::string TensorView::shape_string() const {
  return shape_text(rows, columns);
}

ModelFile ModelFile::from_gguf(std::string path) {
  ModelFile model;
  model.format_ = ModelFormat::Gguf;
  model.gguf_ = std::make_unique<GgufReader>(std::move(path));
  const GgufReader& gguf = *model.gguf_;
  model.path_ = gguf.path();
  model.config_ = llama_config_from_gguf(gguf);
  std::set<std::string, std::less<>> needed;
  for (const ExpectedShape& expected : expected_shapes(model.config_)) needed.insert(expected.name);
  if (const auto version = gguf.find_u32(kQforgeEncodingVersionKey))
    QF_REQUIRE(*version == kQforgeEncodingVersion, model.path_, ": '", kQforgeEncodingVersionKey,
               "' = ", *version, ": this qforge reads encoding version ", kQforgeEncodingVersion,
               " (the file was written by another qforge; re-quantize the source model)");
  // Every encoding key names a tensor of the file.
  for (const GgufKeyValue& kv : gguf.metadata())
    if (kv.key.starts_with(kQforgeEncodedKey) && kv.key.ends_with(".scheme")) {
      const std::string tensor =
          kv.key.substr(kQforgeEncodedKey.size(), kv.key.size() - kQforgeEncodedKey.size() - 7);
      QF_REQUIRE(gguf.find_tensor(tensor) != nullptr, model.path_, ": metadata '", kv.key,
                 "' names the tensor '", tensor, "', which the file does not hold");
    }
  for (const GgufTensorInfo& info : gguf.tensors()) {
    if (is_encoded_part(gguf, info.name)) continue;  // read with the tensor it belongs to
    std::optional<EncodedTensor> encoded = read_encoded_tensor(gguf, info);
    const bool is_needed = needed.count(info.name) != 0;
    // Tensors the Llama graph does not use stay reachable through gguf(), whatever their type.
    if (!encoded && !is_needed && (!is_supported(info.type) || info.n_dims > 2)) continue;
    if (info.n_dims > 2)
      fail(model.path_, ": tensor '", info.name, "' has ", info.n_dims, " dims ",
           info.shape_string(), ", expected a matrix or a vector");
    // Throws for Q4_K etc.
    const std::span<const std::byte> data =
        encoded ? gguf.raw_tensor_data(info) : gguf.tensor_data(info);
    TensorView view{info.name,
                    info.type,
                    static_cast<std::int64_t>(info.rows()),
                    static_cast<std::int64_t>(info.columns()),
                    data.data(),
                    data.size()};
    view.file_offset = static_cast<std::uint64_t>(data.data() - gguf.file_data());
    view.file_type = info.type;
    if (encoded) {
      const EncodedGeometry& g = encoded->geometry;
      view.columns = g.k;
      view.byte_size += static_cast<std::uint64_t>(g.n * g.groups()) *
                        (sizeof(float) + (g.scheme.asymmetric ? 1 : 0));
      view.encoded = std::make_shared<const EncodedTensor>(std::move(*encoded));
    }
    model.add(std::move(view));
  }
  model.check_shapes();
  model.read_rope_freq_factors();
  model.read_activation_scales();
  return model;
}

void ModelFile::read_rope_freq_factors() {
  const TensorView* factors = find_tensor("rope_freqs.weight");
  if (factors == nullptr) return;
  const int pairs = config_.rope_dim / 2;
  QF_REQUIRE(factors->type == GgmlType::F32 && factors->rows == 1 && factors->columns == pairs,
             path_, ": tensor 'rope_freqs.weight' is ", ggml_type_name(factors->type), " ",
             factors->shape_string(), ", expected F32 [1][", pairs, "] (rope dimensions / 2)");
  config_.rope_freq_factors.resize(static_cast<std::size_t>(pairs));
  factors->row_to_f32(0, config_.rope_freq_factors);
  for (int p = 0; p < pairs; ++p) {
    const float f = config_.rope_freq_factors[static_cast<std::size_t>(p)];
    QF_REQUIRE(std::isfinite(f) && f > 0.0f, path_, ": tensor 'rope_freqs.weight' [", p, "] is ", f,
               ", expected a positive frequency factor");
  }
}

void ModelFile::read_activation_scales() {
  std::set<std::string, std::less<>> layers{"output"};
  for (int l = 0; l < config_.n_layers; ++l)
    for (const char* site : {"attn_qkv", "attn_output", "ffn_gate_up", "ffn_down"})
      layers.insert("blk." + std::to_string(l) + "." + site);
  for (const GgufKeyValue& kv : gguf_->metadata()) {
    if (!kv.key.starts_with(kActivationScaleKey)) continue;
    const std::string layer = kv.key.substr(kActivationScaleKey.size());
    QF_REQUIRE(layers.count(layer) != 0, path_, ": metadata '", kv.key, "' names no linear layer ",
               "of the model (blk.N.attn_qkv, attn_output, ffn_gate_up, ffn_down, output)");
    const double scale = kv.value.is_floating() ? kv.value.as_double() : -1.0;
    QF_REQUIRE(kv.value.type() == GgufValueType::Float32 && std::isfinite(scale) && scale > 0,
               path_, ": metadata '", kv.key, "' = ", kv.value.describe(),
               ", expected a positive finite float32 (a static activation scale)");
    activation_scales_.insert_or_assign(layer, static_cast<float>(scale));
  }
}

ModelFile ModelFile::from_llama2c(std::string path) {
  ModelFile model;
  model.format_ = ModelFormat::Llama2c;
  model.llama2c_ = std::make_unique<Llama2cCheckpoint>(std::move(path));
  model.path_ = model.llama2c_->path();
  model.config_ = model.llama2c_->config();
  for (const Llama2cTensor& tensor : model.llama2c_->tensors()) {
    std::string name = gguf_name_of(tensor);
    if (name.empty()) continue;
    TensorView view{std::move(name), GgmlType::F32, tensor.rows,
                    tensor.columns,  tensor.data,   tensor.byte_size()};
    view.file_offset = static_cast<std::uint64_t>(tensor.data - model.llama2c_->file_data());
    model.add(std::move(view));
  }
  model.check_shapes();
  return model;
}

void ModelFile::add(TensorView view) {
  index_.emplace(view.name, tensors_.size());
  tensors_.push_back(std::move(view));
}

void ModelFile::check_shapes() const {
  const TensorView* embedding = find_tensor("token_embd.weight");
  if (embedding && embedding->columns == config_.dim && embedding->rows != config_.vocab_size)
    fail(path_, ": tensor 'token_embd.weight' has ", embedding->rows,
         " rows, but the vocabulary has ", config_.vocab_size, " tokens (",
         format_ == ModelFormat::Gguf ? gguf_field_names(config_.architecture).vocab_size
                                      : kLlama2cFields.vocab_size,
         ")");
  for (const ExpectedShape& expected : expected_shapes(config_)) {
    const TensorView* actual = find_tensor(expected.name);
    if (!actual) fail(path_, ": tensor '", expected.name, "' is missing");
    if (actual->rows != expected.rows || actual->columns != expected.columns)
      fail(path_, ": tensor '", expected.name, "' has shape ", actual->shape_string(),
           " (rows x columns), expected ", shape_text(expected.rows, expected.columns),
           " from the config (", config_.to_string(), ")");
  }
}

std::uint64_t ModelFile::bytes_per_token() const {
  std::uint64_t bytes = 0;
  for (const TensorView& t : tensors_) bytes += t.byte_size;
  const TensorView* embedding = find_tensor("token_embd.weight");
  if (embedding && &classifier() != embedding)
    bytes = bytes - embedding->byte_size +
            embedding->byte_size /
                static_cast<std::uint64_t>(std::max<std::int64_t>(1, embedding->rows));
  return bytes;
}

const TensorView* ModelFile::find_tensor(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& ModelFile::tensor(std::string_view name) const {
  const TensorView* view = find_tensor(name);
  if (!view) fail(path_, ": tensor '", name, "' is missing");
  return *view;
}

const TensorView& ModelFile::layer_tensor(int layer, std::string_view role) const {
  return tensor(layer_tensor_name(layer, role));
}

const TensorView& ModelFile::classifier() const {
  return config_.tied_embedding ? tensor("token_embd.weight") : tensor("output.weight");
}

void ModelFile::replace_tensor(std::string_view name, std::vector<float> values) {
  const auto it = index_.find(name);
  QF_REQUIRE(it != index_.end(), path_, ": no tensor '", name, "' to replace");
  TensorView& view = tensors_[it->second];
  QF_REQUIRE(static_cast<std::int64_t>(values.size()) == view.rows * view.columns, path_,
             ": replacing '", name, "' ", view.shape_string(), " with ", values.size(), " values");
  replaced_.push_back(std::make_unique<std::vector<float>>(std::move(values)));
  const std::vector<float>& owned = *replaced_.back();
  view.type = GgmlType::F32;
  view.data = reinterpret_cast<const std::byte*>(owned.data());
  view.byte_size = owned.size() * sizeof(float);
  view.in_memory = true;
  view.encoded.reset();
}

void ModelFile::set_prequantized(std::string_view name, QuantizedTensor tensor,
                                 std::string method) {
  const TensorView& view = this->tensor(name);
  QF_REQUIRE(tensor.n == view.rows && tensor.k == view.columns, path_, ": a quantization of '",
             name, "' ", view.shape_string(), " has shape [", tensor.n, "][", tensor.k, "]");
  prequantized_.insert_or_assign(std::string(name),
                                 Prequantized{std::move(tensor), std::move(method)});
}

void ModelFile::set_activation_scale(std::string_view layer, float scale) {
  QF_REQUIRE(std::isfinite(scale) && scale > 0.f, layer, ": activation scale ", scale,
             " is not a positive finite number");
  activation_scales_.insert_or_assign(std::string(layer), scale);
}

void ModelFile::clear_activation_scale(std::string_view layer) {
  if (const auto it = activation_scales_.find(layer); it != activation_scales_.end())
    activation_scales_.erase(it);
}

void ModelFile::clear_activation_scales() {
  activation_scales_.clear();
}

float ModelFile::activation_scale(std::string_view layer) const {
  const auto it = activation_scales_.find(layer);
  return it == activation_scales_.end() ? 0.f : it->second;
}

std::string ModelFile::prequantized_method(std::string_view name) const {
  const auto it = prequantized_.find(name);
  return it == prequantized_.end() ? "" : it->second.method;
}

const QuantizedTensor* ModelFile::prequantized(std::string_view name,
                                               const QuantScheme& scheme) const {
  const auto it = prequantized_.find(name);
  return it == prequantized_.end() ||
                 !(stored_form(it->second.tensor.scheme) == stored_form(scheme))
             ? nullptr
             : &it->second.tensor;
}

void write_with_replacements(const ModelFile& model, const std::string& path) {
  for (const TensorView& t : model.tensors())
    QF_REQUIRE(!t.in_memory || t.file_type == GgmlType::F32, model.path(), ": tensor '", t.name,
               "' is ", ggml_type_name(t.file_type),
               " in the file; only F32 tensors can be replaced in place");
  const std::string temp = path + ".tmp";
  std::error_code error;
  std::filesystem::copy_file(model.path(), temp, std::filesystem::copy_options::overwrite_existing,
                             error);
  QF_REQUIRE(!error, temp, ": cannot copy ", model.path(), ": ", error.message());
  {
    std::fstream out(temp, std::ios::binary | std::ios::in | std::ios::out);
    QF_REQUIRE(out.good(), temp, ": cannot open for writing");
    for (const TensorView& t : model.tensors()) {
      if (!t.in_memory) continue;
      out.seekp(static_cast<std::streamoff>(t.file_offset));
      out.write(reinterpret_cast<const char*>(t.data), static_cast<std::streamsize>(t.byte_size));
    }
    out.flush();
    if (!out.good()) {
      std::filesystem::remove(temp, error);
      fail(temp, ": write failed");
    }
  }
  std::filesystem::rename(temp, path, error);
  QF_REQUIRE(!error, path, ": cannot rename from ", temp, ": ", error.message());
}

ModelFile open_model(const std::string& path) {
  if (!std::ifstream(path, std::ios::binary)) fail(path, ": cannot open: ", std::strerror(errno));
  if (starts_with_gguf_magic(path) || std::filesystem::path(path).extension() == ".gguf")
    return ModelFile::from_gguf(path);
  try {
    return ModelFile::from_llama2c(path);
  } catch (const Error& error) {
    if (std::filesystem::path(path).extension() == ".bin") throw;
    fail(path,
         ": not a GGUF file (no \"GGUF\" magic), and not a llama2.c checkpoint: ", error.what());
  }
}

}  // namespace qforge
