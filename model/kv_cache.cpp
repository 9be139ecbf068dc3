#include "model/kv_cache.h"

#include "jit/base/error.h"

namespace qforge {

KvCache::KvCache(int layers, int positions, int kv_dim) : positions_(positions), kv_dim_(kv_dim) {
  QF_REQUIRE(layers > 0 && positions > 0 && kv_dim > 0, "kv cache: bad shape ", layers, " x ",
             positions, " x ", kv_dim);
  const std::size_t size = static_cast<std::size_t>(layers) * positions * kv_dim;
  keys_.assign(size, 0.f);
  values_.assign(size, 0.f);
}

}  // namespace qforge
