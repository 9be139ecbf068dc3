// The token embedding as the executor looks it up, one row per token:
//
//   f32   rows[token][0..dim)                              exact
//   int8  q[token][0..dim), scale[token]                   x = scale * q,
//                                                          scale = max|row| / 127
//   file  the file's own rows in their ggml type           x = ggml's decode, exact
//         (Q8_0 / Q4_0 / Q4_1 blocks)
// A native run of a file in qforge's encoding keeps an int8 per-channel table as the int8
// form (the same arithmetic) and any other scheme's rows decoded to f32.
// A quantized model keeps the int8 form (a quarter of the memory; llama.cpp keeps its
// quantized token_embd the same way), a native run of a quantized file the file's form;
// an f32 / bf16 model keeps f32.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/format/gguf_types.h"
#include "ops/quant/pack.h"

namespace qforge {

class EmbeddingTable {
 public:
  EmbeddingTable() = default;
  // `values` is row-major rows x dim.
  EmbeddingTable(std::vector<float> values, std::int64_t rows, std::int64_t dim, bool int8);
  // The int8 table of rows x dim, reading 16 rows at a time from `source`, which
  // `threads` threads call concurrently for disjoint rows.
  static EmbeddingTable int8_from_rows(std::int64_t rows, std::int64_t dim, const RowSource& source,
                                       int threads);

  // The int8 form from its parts: `operands` rows x dim (q + 128), `scales` one per row.
  static EmbeddingTable int8_table(std::vector<std::uint8_t> operands, std::vector<float> scales,
                                   std::int64_t rows, std::int64_t dim);

  // The file's rows of `type` (rows x row_bytes bytes), copied and kept as they are.
  static EmbeddingTable file_rows(GgmlType type, std::span<const std::byte> bytes,
                                  std::int64_t rows, std::int64_t dim);

  // Writes row `token` (dim floats) to `out`.
  void lookup(std::int64_t token, float* out) const;

  std::int64_t rows() const { return rows_; }
  std::int64_t dim() const { return dim_; }
  bool int8() const { return !q_.empty(); }
  std::uint64_t bytes() const;
  std::uint64_t row_bytes() const;

 private:
  // Sets q_ and scales_ of row r from its floats.
  void quantize_row(std::int64_t r, const float* values);

  std::int64_t rows_ = 0, dim_ = 0;
  std::vector<float> f32_;
  std::vector<std::uint8_t> q_;  // q + 128 (the packed layout's int8 operand)
  std::vector<float> scales_;
  std::vector<std::byte> file_;  // file rows of type file_type_
  GgmlType file_type_ = GgmlType::F32;
  std::uint64_t file_row_bytes_ = 0;
};

}  // namespace qforge
