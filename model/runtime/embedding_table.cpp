#include "model/runtime/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "model/format/ggml_quants.h"
#include "ops/quant/quantize_fast.h"

namespace qforge {

EmbeddingTable::EmbeddingTable(std::vector<float> values, std::int64_t rows, std::int64_t dim,
                               bool int8)
    : rows_(rows), dim_(dim) {
  QF_REQUIRE(static_cast<std::int64_t>(values.size()) == rows * dim, "embedding: ", values.size(),
             " values for ", rows, " x ", dim);
  if (!int8) {
    f32_ = std::move(values);
    return;
  }
  q_.resize(values.size());
  scales_.resize(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) quantize_row(r, values.data() + r * dim);
}

EmbeddingTable EmbeddingTable::int8_from_rows(std::int64_t rows, std::int64_t dim,
                                              const RowSource& source, int threads) {
  constexpr std::int64_t kRowsPerRead = 16;
  EmbeddingTable table;
  table.rows_ = rows;
  table.dim_ = dim;
  table.q_.resize(static_cast<std::size_t>(rows * dim));
  table.scales_.resize(static_cast<std::size_t>(rows));
  const std::int64_t reads = (rows + kRowsPerRead - 1) / kRowsPerRead;
  parallel_for(reads, threads, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> values(static_cast<std::size_t>(kRowsPerRead * dim));
    for (std::int64_t i = begin; i < end; ++i) {
      const std::int64_t first = i * kRowsPerRead;
      const std::int64_t count = std::min(kRowsPerRead, rows - first);
      source(first, count, values.data());
      for (std::int64_t r = 0; r < count; ++r)
        table.quantize_row(first + r, values.data() + r * dim);
    }
  });
  return table;
}

// Per-row symmetric int8: the packing arithmetic with one group per row.
void EmbeddingTable::quantize_row(std::int64_t r, const float* values) {
  bool finite = true;
  const GroupParams p = choose_group_params_fast(values, dim_, 8, false, &finite);
  QF_REQUIRE(finite, "embedding: row ", r, " has a non-finite value");
  scales_[static_cast<std::size_t>(r)] = p.scale;
  quantize_operands_fast(values, dim_, dim_, p, 8, false, /*offset=*/128, q_.data() + r * dim_);
}

EmbeddingTable EmbeddingTable::int8_table(std::vector<std::uint8_t> operands,
                                          std::vector<float> scales, std::int64_t rows,
                                          std::int64_t dim) {
  QF_REQUIRE(static_cast<std::int64_t>(operands.size()) == rows * dim &&
                 static_cast<std::int64_t>(scales.size()) == rows,
             "embedding: ", operands.size(), " operands and ", scales.size(), " scales for ", rows,
             " x ", dim);
  EmbeddingTable table;
  table.rows_ = rows;
  table.dim_ = dim;
  table.q_ = std::move(operands);
  table.scales_ = std::move(scales);
  return table;
}

EmbeddingTable EmbeddingTable::file_rows(GgmlType type, std::span<const std::byte> bytes,
                                         std::int64_t rows, std::int64_t dim) {
  EmbeddingTable table;
  table.rows_ = rows;
  table.dim_ = dim;
  table.file_type_ = type;
  table.file_row_bytes_ = ggml_row_bytes(type, static_cast<std::uint64_t>(dim));
  QF_REQUIRE(bytes.size() == table.file_row_bytes_ * static_cast<std::uint64_t>(rows),
             "embedding: ", bytes.size(), " bytes for ", rows, " rows of ", dim, " ",
             ggml_type_name(type));
  table.file_.assign(bytes.begin(), bytes.end());
  return table;
}

void EmbeddingTable::lookup(std::int64_t token, float* out) const {
  QF_REQUIRE(token >= 0 && token < rows_, "embedding: token ", token, " outside [0, ", rows_, ")");
  if (!file_.empty()) {
    const std::span<const std::byte> row(file_.data() + token * file_row_bytes_, file_row_bytes_);
    dequantize_row(file_type_, row, std::span<float>(out, static_cast<std::size_t>(dim_)));
    return;
  }
  if (q_.empty()) {
    std::memcpy(out, f32_.data() + token * dim_, std::size_t(dim_) * sizeof(float));
    return;
  }
  const std::uint8_t* q = q_.data() + token * dim_;
  const float scale = scales_[std::size_t(token)];
  for (std::int64_t i = 0; i < dim_; ++i) out[i] = scale * float(int{q[i]} - 128);
}

std::uint64_t EmbeddingTable::bytes() const {
  return f32_.size() * sizeof(float) + q_.size() + scales_.size() * sizeof(float) + file_.size();
}

std::uint64_t EmbeddingTable::row_bytes() const {
  if (!file_.empty()) return file_row_bytes_;
  return q_.empty() ? std::uint64_t(dim_) * sizeof(float) : std::uint64_t(dim_) + sizeof(float);
}

}  // namespace qforge
