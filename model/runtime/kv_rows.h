// A run of cached key or value rows as attention reads them: `data` holds row p at
// p * stride elements, each of `type`. int8 rows carry their scales (f16, as the GGUF
// blocks keep theirs) one of two ways:
//
//   per row        x[p][c] = scales[p] * q[p][c]                          (values)
//   per channel    x[p][c] = channel_scales[g * stride + c] * q[p][c],    (keys, KIVI)
//                  g = (position + p) / group: one scale per channel and group of positions
//
// and rows from position `exact_from` on (the query's own, still open group) are read as
// f32 from `exact` instead, row p at (position + p - exact_from) * stride:
//
//   positions  0 ........................ exact_from ......... last
//              int8 rows (scaled)          f32 rows (exact)
#pragma once

#include <cstdint>
#include <limits>

namespace qforge {

enum class KvType : std::uint8_t { f32, bf16, int8 };

struct KvRows {
  KvType type = KvType::f32;
  const void* data = nullptr;
  const std::uint16_t* scales = nullptr;  // int8, per row (f16 bits)
  std::int64_t stride = 0;                // elements between rows
  // int8, per channel: scales (f16 bits) of the groups from position 0 on, `group`
  // positions each.
  const std::uint16_t* channel_scales = nullptr;
  int group = 0;
  std::int64_t position = 0;  // the position of row 0
  // Rows at positions >= exact_from, as f32 (none: exact_from is the largest position).
  const float* exact = nullptr;
  std::int64_t exact_from = std::numeric_limits<std::int64_t>::max();

  // The rows from row `first` on.
  KvRows from(std::int64_t first) const {
    const std::int64_t bytes = type == KvType::f32 ? 4 : type == KvType::bf16 ? 2 : 1;
    KvRows out = *this;
    out.data = static_cast<const char*>(data) + first * stride * bytes;
    if (scales != nullptr) out.scales = scales + first;
    out.position = position + first;
    return out;
  }
  // Rows whose values are plain elements times (at most) a per-row scale: the only form
  // the KvRows overloads of dot_rows / weighted_rows read without decoding.
  bool plain() const { return channel_scales == nullptr && exact == nullptr; }
};

}  // namespace qforge
