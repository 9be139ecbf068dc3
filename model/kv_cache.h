// The f32 key/value cache of every layer:
//
//   keys[layer][position][kv_dim]     kv_dim = n_kv_heads x head_dim, head h at h * head_dim
//   values[layer][position][kv_dim]
#pragma once

#include <cstdint>
#include <vector>

namespace qforge {

class KvCache {
 public:
  KvCache(int layers, int positions, int kv_dim);

  float* key(int layer, int position) { return keys_.data() + offset(layer, position); }
  float* value(int layer, int position) { return values_.data() + offset(layer, position); }
  const float* key(int layer, int position) const { return keys_.data() + offset(layer, position); }
  const float* value(int layer, int position) const {
    return values_.data() + offset(layer, position);
  }

  int positions() const { return positions_; }
  int kv_dim() const { return kv_dim_; }
  std::uint64_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

 private:
  std::size_t offset(int layer, int position) const {
    return (static_cast<std::size_t>(layer) * positions_ + position) * kv_dim_;
  }

  int positions_;
  int kv_dim_;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace qforge
