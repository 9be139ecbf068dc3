// Reads llama2.c "legacy" (version 0) checkpoints through a read-only mapping.
//
//   offset 0    int32  dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//                      (vocab_size < 0: the classifier is not tied; wcls is stored last)
//   offset 28   float32 tensors, back to back, each row-major [out][in]:
//     token_embedding_table  [vocab][dim]
//     rms_att_weight         [L][dim]
//     wq                     [L][dim][dim]
//     wk                     [L][kv_dim][dim]         kv_dim = dim / n_heads * n_kv_heads
//     wv                     [L][kv_dim][dim]
//     wo                     [L][dim][dim]
//     rms_ffn_weight         [L][dim]
//     w1                     [L][hidden_dim][dim]     gate
//     w2                     [L][dim][hidden_dim]     down
//     w3                     [L][hidden_dim][dim]     up
//     rms_final_weight       [dim]
//     freq_cis_real          [seq_len][head_dim / 2]  (unused: RoPE is recomputed)
//     freq_cis_imag          [seq_len][head_dim / 2]
//     wcls                   [vocab][dim]             only when vocab_size < 0
//
// The file size must equal the sum exactly. rms_eps is 1e-5 and RoPE theta 10000.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "model/format/llama_config.h"
#include "model/format/mapped_file.h"

namespace qforge {

inline constexpr std::size_t kLlama2cHeaderBytes = 7 * sizeof(std::int32_t);

// One float32 matrix of the checkpoint; per-layer tensors are split into one entry per
// layer (layer >= 0), whole-model ones have layer -1. 1-D tensors have rows == 1.
struct Llama2cTensor {
  std::string name;  // llama2.c field name, e.g. "wq"
  int layer = -1;
  std::int64_t rows = 0;
  std::int64_t columns = 0;
  const std::byte* data = nullptr;  // float32, little-endian, 4-byte aligned in the mapping

  std::uint64_t byte_size() const { return static_cast<std::uint64_t>(rows * columns) * 4; }
};

class Llama2cCheckpoint {
 public:
  // Throws qforge::Error naming the file and the header field or tensor at fault.
  explicit Llama2cCheckpoint(std::string path);

  const std::string& path() const { return file_.path(); }
  const std::byte* file_data() const { return file_.data(); }
  const LlamaConfig& config() const { return config_; }
  const std::vector<Llama2cTensor>& tensors() const { return tensors_; }

 private:
  MappedFile file_;
  LlamaConfig config_;
  std::vector<Llama2cTensor> tensors_;
};

}  // namespace qforge
