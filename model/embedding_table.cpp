#include "model/embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"

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
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * dim;
    float max_abs = 0;
    for (std::int64_t i = 0; i < dim; ++i) max_abs = std::max(max_abs, std::fabs(row[i]));
    QF_REQUIRE(std::isfinite(max_abs), "embedding: row ", r, " has a non-finite value");
    const float scale = max_abs / 127.f;
    scales_[std::size_t(r)] = scale;
    for (std::int64_t i = 0; i < dim; ++i)
      q_[std::size_t(r * dim + i)] =
          scale > 0 ? static_cast<std::int8_t>(std::round(row[i] / scale)) : std::int8_t{0};
  }
}

void EmbeddingTable::lookup(std::int64_t token, float* out) const {
  QF_REQUIRE(token >= 0 && token < rows_, "embedding: token ", token, " outside [0, ", rows_, ")");
  if (q_.empty()) {
    std::memcpy(out, f32_.data() + token * dim_, std::size_t(dim_) * sizeof(float));
    return;
  }
  const std::int8_t* q = q_.data() + token * dim_;
  const float scale = scales_[std::size_t(token)];
  for (std::int64_t i = 0; i < dim_; ++i) out[i] = scale * float(q[i]);
}

std::uint64_t EmbeddingTable::bytes() const {
  return f32_.size() * sizeof(float) + q_.size() + scales_.size() * sizeof(float);
}

std::uint64_t EmbeddingTable::row_bytes() const {
  return q_.empty() ? std::uint64_t(dim_) * sizeof(float) : std::uint64_t(dim_) + sizeof(float);
}

}  // namespace qforge
