// The f32 key/value cache of every layer, one contiguous block per kv head:
//
//   keys[layer][kv_head][position][head_dim]
//   values[layer][kv_head][position][head_dim]
//
// A head's attention reads its keys (then its values) as one sequential stream, rows
// head_dim floats apart. store() scatters a position's projected row
// [ head 0 | head 1 | ... ] (kv_dim = kv_heads x head_dim floats) into the blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace qforge {

class KvCache {
 public:
  KvCache(int layers, int positions, int kv_heads, int head_dim);

  void store(int layer, int position, const float* key_row, const float* value_row);

  float* key(int layer, int kv_head, int position) {
    return keys_.data() + offset(layer, kv_head, position);
  }
  float* value(int layer, int kv_head, int position) {
    return values_.data() + offset(layer, kv_head, position);
  }
  const float* key(int layer, int kv_head, int position) const {
    return keys_.data() + offset(layer, kv_head, position);
  }
  const float* value(int layer, int kv_head, int position) const {
    return values_.data() + offset(layer, kv_head, position);
  }

  int positions() const { return positions_; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  std::uint64_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

 private:
  std::size_t offset(int layer, int kv_head, int position) const {
    return ((static_cast<std::size_t>(layer) * kv_heads_ + kv_head) * positions_ + position) *
           head_dim_;
  }

  int positions_;
  int kv_heads_;
  int head_dim_;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace qforge
