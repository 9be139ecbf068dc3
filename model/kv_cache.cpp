#include "model/kv_cache.h"

#include <cstring>

#include "jit/base/error.h"

namespace qforge {

KvCache::KvCache(int layers, int positions, int kv_heads, int head_dim)
    : positions_(positions), kv_heads_(kv_heads), head_dim_(head_dim) {
  QF_REQUIRE(layers > 0 && positions > 0 && kv_heads > 0 && head_dim > 0, "kv cache: bad shape ",
             layers, " x ", kv_heads, " x ", positions, " x ", head_dim);
  const std::size_t size = static_cast<std::size_t>(layers) * kv_heads * positions * head_dim;
  keys_.assign(size, 0.f);
  values_.assign(size, 0.f);
}

void KvCache::store(int layer, int position, const float* key_row, const float* value_row) {
  const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(head_dim_);
  for (int h = 0; h < kv_heads_; ++h) {
    std::memcpy(key(layer, h, position), key_row + std::size_t(h) * head_dim_, bytes);
    std::memcpy(value(layer, h, position), value_row + std::size_t(h) * head_dim_, bytes);
  }
}

}  // namespace qforge
