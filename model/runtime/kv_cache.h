// The key/value cache of every layer, one contiguous block per kv head:
//
//   keys[layer][kv_head][position][head_dim]
//   values[layer][kv_head][position][head_dim]
//
// A head's attention reads its keys (then its values) as one sequential stream, rows
// head_dim elements apart. store() scatters a position's projected row
// [ head 0 | head 1 | ... ] (kv_dim = kv_heads x head_dim floats) into the blocks, in the
// cache's element type:
//
//   f32   the row as it is                                   4 bytes per value
//   bf16  each value rounded to nearest-even bf16            2 bytes per value
//   int8  q = round(x / s), s = max|row| / 127, per          1 byte per value + one f32
//         (layer, kv head, position) row: x ~ s * q          scale per row
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/runtime/kv_rows.h"

namespace qforge {

// "f32" | "bf16" | "int8"; throws qforge::Error naming `where` otherwise.
KvType parse_kv_type(std::string_view text, std::string_view where = "--kv");
const char* to_string(KvType type);

class KvCache {
 public:
  KvCache(int layers, int positions, int kv_heads, int head_dim, KvType type = KvType::f32);

  void store(int layer, int position, const float* key_row, const float* value_row);

  // A kv head's rows from position 0 on.
  KvRows keys(int layer, int kv_head) const { return rows(keys_, key_scales_, layer, kv_head); }
  KvRows values(int layer, int kv_head) const {
    return rows(values_, value_scales_, layer, kv_head);
  }

  int positions() const { return positions_; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  KvType type() const { return type_; }
  std::uint64_t bytes() const;

 private:
  std::size_t row_index(int layer, int kv_head, int position) const {
    return (static_cast<std::size_t>(layer) * kv_heads_ + kv_head) * positions_ + position;
  }
  KvRows rows(const std::vector<std::byte>& data, const std::vector<float>& scales, int layer,
              int kv_head) const;
  void store_row(std::vector<std::byte>& data, std::vector<float>& scales, std::size_t row,
                 const float* values);

  int positions_;
  int kv_heads_;
  int head_dim_;
  KvType type_;
  std::size_t element_bytes_;
  std::vector<std::byte> keys_, values_;
  std::vector<float> key_scales_, value_scales_;  // int8: one per row
};

}  // namespace qforge
