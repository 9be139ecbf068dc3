#include "model/format/llama2c_reader.h"

#include <cstring>

#include "jit/base/error.h"
#include "model/format/byte_cursor.h"

namespace qforge {

namespace {

// "ak42", the magic of llama2.c's versioned exports (version 1 and 2).
constexpr std::uint32_t kVersionedExportMagic = 0x616b3432;

struct Section {
  const char* name;
  bool per_layer;
  bool is_vector;  // 1-D: rows == 1
  std::int64_t rows;
  std::int64_t columns;
};

std::vector<Section> sections_of(const LlamaConfig& c) {
  std::vector<Section> sections = {
      {"token_embedding_table", false, false, c.vocab_size, c.dim},
      {"rms_att_weight", true, true, 1, c.dim},
      {"wq", true, false, c.dim, c.dim},
      {"wk", true, false, c.kv_dim(), c.dim},
      {"wv", true, false, c.kv_dim(), c.dim},
      {"wo", true, false, c.dim, c.dim},
      {"rms_ffn_weight", true, true, 1, c.dim},
      {"w1", true, false, c.hidden_dim, c.dim},
      {"w2", true, false, c.dim, c.hidden_dim},
      {"w3", true, false, c.hidden_dim, c.dim},
      {"rms_final_weight", false, true, 1, c.dim},
      {"freq_cis_real", false, false, c.seq_len, c.head_dim / 2},
      {"freq_cis_imag", false, false, c.seq_len, c.head_dim / 2},
  };
  if (!c.tied_embedding) sections.push_back({"wcls", false, false, c.vocab_size, c.dim});
  return sections;
}

// "[5][64][172]" for w2 of stories260K.
std::string shape_of(const Section& section, int layers) {
  std::string out;
  if (section.per_layer) out += "[" + std::to_string(layers) + "]";
  if (!section.is_vector) out += "[" + std::to_string(section.rows) + "]";
  return out + "[" + std::to_string(section.columns) + "]";
}

}  // namespace

Llama2cCheckpoint::Llama2cCheckpoint(std::string path) : file_(std::move(path)) {
  ByteCursor cursor(file_.bytes(), file_.path());
  cursor.set_context("llama2.c header");
  const auto first = cursor.read<std::int32_t>("dim");
  if (static_cast<std::uint32_t>(first) == kVersionedExportMagic)
    cursor.fail_here(
        "magic \"ak42\": this is a versioned llama2.c export (version 1 or 2); "
        "only the legacy version 0 checkpoint (export with --version 0) is read");
  std::int32_t header[7] = {first};
  constexpr const char* kFieldNames[7] = {"dim",        "hidden_dim", "n_layers", "n_heads",
                                          "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 1; i < 7; ++i) header[i] = cursor.read<std::int32_t>(kFieldNames[i]);

  config_.dim = header[0];
  config_.hidden_dim = header[1];
  config_.n_layers = header[2];
  config_.n_heads = header[3];
  config_.n_kv_heads = header[4];
  config_.tied_embedding = header[5] > 0;
  config_.vocab_size = header[5] == INT32_MIN ? 0 : (header[5] < 0 ? -header[5] : header[5]);
  config_.seq_len = header[6];
  config_.rms_eps = 1e-5f;
  config_.rope_theta = 10000.0f;
  config_.head_dim = config_.n_heads > 0 ? config_.dim / config_.n_heads : 0;
  config_.rope_dim = config_.head_dim;
  validate_llama_config(config_, file_.path(), kLlama2cFields);

  // validate_llama_config bounds every size, so these products fit easily in 64 bits.
  cursor.set_context("");
  std::uint64_t offset = kLlama2cHeaderBytes;
  const std::uint64_t file_size = file_.size();
  std::string last_name;
  for (const Section& section : sections_of(config_)) {
    const int copies = section.per_layer ? config_.n_layers : 1;
    const std::uint64_t tensor_bytes =
        static_cast<std::uint64_t>(section.rows) * static_cast<std::uint64_t>(section.columns) * 4;
    const std::uint64_t section_bytes = tensor_bytes * static_cast<std::uint64_t>(copies);
    if (offset + section_bytes > file_size)
      fail(file_.path(), ": truncated: tensor '", section.name, "' ",
           shape_of(section, config_.n_layers), " needs bytes [", offset, ", ",
           offset + section_bytes, "), but the file has ", file_size,
           " bytes (header: ", config_.to_string(), ")");
    for (int layer = 0; layer < copies; ++layer) {
      tensors_.push_back({section.name, section.per_layer ? layer : -1, section.rows,
                          section.columns, file_.data() + offset});
      offset += tensor_bytes;
    }
    last_name = section.name;
  }
  if (offset != file_size)
    fail(file_.path(), ": ", file_size - offset, " bytes follow the last tensor '", last_name,
         "' (expected a file of ", offset, " bytes for header ", config_.to_string(),
         "); the header does not describe this file");
}

}  // namespace qforge
