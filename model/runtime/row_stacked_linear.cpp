#include "model/runtime/row_stacked_linear.h"

#include <algorithm>

#include "jit/base/error.h"

namespace qforge {

RowStackedLinear::RowStackedLinear(std::vector<std::unique_ptr<LinearLayer>> parts)
    : parts_(std::move(parts)) {
  QF_REQUIRE(!parts_.empty(), "row-stacked layer: no parts");
  for (const auto& part : parts_) {
    QF_REQUIRE(part->fusion() == LinearFusion::plain && part->k() == parts_.front()->k(),
               "row-stacked layer: every part must be a plain layer of K ", parts_.front()->k());
    n_ += part->n();
  }
}

void RowStackedLinear::forward(const float* x, std::int64_t m, std::int64_t ldx, float* out,
                               std::int64_t ldc, ThreadPool& pool) {
  std::int64_t column = 0;
  for (const auto& part : parts_) {
    part->forward(x, m, ldx, out + column, ldc, pool);
    column += part->n();
  }
}

std::uint64_t RowStackedLinear::weight_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& part : parts_) bytes += part->weight_bytes();
  return bytes;
}

std::vector<GemmKey> RowStackedLinear::warmup_keys() const {
  std::vector<GemmKey> keys;
  for (const auto& part : parts_)
    for (const GemmKey& key : part->warmup_keys())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  return keys;
}

std::uint64_t RowStackedLinear::packed_arena_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& part : parts_) bytes += part->packed_arena_bytes();
  return bytes;
}

void RowStackedLinear::move_packed_into(const std::shared_ptr<HugePageArena>& arena) {
  for (const auto& part : parts_) part->move_packed_into(arena);
}

}  // namespace qforge
