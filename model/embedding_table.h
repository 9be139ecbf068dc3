// The token embedding as the executor looks it up, one row per token:
//
//   f32   rows[token][0..dim)                              exact
//   int8  q[token][0..dim), scale[token]                   x = scale * q,
//                                                          scale = max|row| / 127
// A quantized model keeps the int8 form (a quarter of the memory; llama.cpp keeps its
// quantized token_embd the same way); an f32 / bf16 model keeps f32.
#pragma once

#include <cstdint>
#include <vector>

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
};

}  // namespace qforge
