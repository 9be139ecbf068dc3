// A run of cached key or value rows as attention reads them: `data` holds row p at
// p * stride elements, each of `type`; int8 rows carry a scale each (x = scale[p] * q).
#pragma once

#include <cstdint>

namespace qforge {

enum class KvType : std::uint8_t { f32, bf16, int8 };

struct KvRows {
  KvType type = KvType::f32;
  const void* data = nullptr;
  const float* scales = nullptr;  // int8 only
  std::int64_t stride = 0;        // elements between rows

  // The rows from position `first` on.
  KvRows from(std::int64_t first) const {
    const std::int64_t bytes = type == KvType::f32 ? 4 : type == KvType::bf16 ? 2 : 1;
    KvRows out = *this;
    out.data = static_cast<const char*>(data) + first * stride * bytes;
    if (scales != nullptr) out.scales = scales + first;
    return out;
  }
};

}  // namespace qforge
