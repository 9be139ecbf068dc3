#include "model/runtime/kv_cache.h"

#include <new>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "ops/quant/activation.h"

namespace qforge {

KvType parse_kv_type(std::string_view text, std::string_view where) {
  if (text == "f32") return KvType::f32;
  if (text == "bf16") return KvType::bf16;
  if (text == "int8") return KvType::int8;
  fail(where, ": '", text, "' is not one of f32, bf16, int8");
}

const char* to_string(KvType type) {
  switch (type) {
    case KvType::bf16:
      return "bf16";
    case KvType::int8:
      return "int8";
    case KvType::f32:
      break;
  }
  return "f32";
}

KvCache::KvCache(int layers, int positions, int kv_heads, int head_dim, KvType type)
    : positions_(positions),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      type_(type),
      element_bytes_(type == KvType::f32    ? 4
                     : type == KvType::bf16 ? 2
                                            : 1) {
  QF_REQUIRE(layers > 0 && positions > 0 && kv_heads > 0 && head_dim > 0, "kv cache: bad shape ",
             layers, " x ", kv_heads, " x ", positions, " x ", head_dim);
  const std::size_t rows = static_cast<std::size_t>(layers) * kv_heads * positions;
  try {
    keys_.assign(rows * head_dim * element_bytes_, std::byte{0});
    values_.assign(keys_.size(), std::byte{0});
    if (type == KvType::int8) {
      key_scales_.assign(rows, 0.f);
      value_scales_.assign(rows, 0.f);
    }
  } catch (const std::bad_alloc&) {
    const double needed = static_cast<double>(rows) *
                          (2.0 * head_dim * element_bytes_ + (type == KvType::int8 ? 8 : 0));
    fail("not enough memory for the KV cache: ", positions, " positions x ", layers, " layers x ",
         kv_heads, " heads (", to_string(type), ") need ", needed / (1 << 20),
         " MiB; a shorter context or an int8 cache (--kv int8) needs less");
  }
}

std::uint64_t KvCache::bytes() const {
  return keys_.size() + values_.size() + (key_scales_.size() + value_scales_.size()) * 4;
}

KvRows KvCache::rows(const std::vector<std::byte>& data, const std::vector<float>& scales,
                     int layer, int kv_head) const {
  const std::size_t row = row_index(layer, kv_head, 0);
  KvRows out;
  out.type = type_;
  out.data = data.data() + row * head_dim_ * element_bytes_;
  out.scales = scales.empty() ? nullptr : scales.data() + row;
  out.stride = head_dim_;
  return out;
}

void KvCache::store_row(std::vector<std::byte>& data, std::vector<float>& scales, std::size_t row,
                        const float* values) {
  std::byte* out = data.data() + row * head_dim_ * element_bytes_;
  switch (type_) {
    case KvType::f32:
      std::memcpy(out, values, sizeof(float) * static_cast<std::size_t>(head_dim_));
      return;
    case KvType::bf16: {
      auto* bf16 = reinterpret_cast<std::uint16_t*>(out);
      for (int i = 0; i < head_dim_; ++i) bf16[i] = f32_to_bf16(values[i]);
      return;
    }
    case KvType::int8:
      break;
  }
  float absmax = 0.f;
  for (int i = 0; i < head_dim_; ++i) absmax = std::max(absmax, std::abs(values[i]));
  const float scale = absmax / 127.f;
  auto* q = reinterpret_cast<std::int8_t*>(out);
  for (int i = 0; i < head_dim_; ++i)
    q[i] = static_cast<std::int8_t>(
        scale > 0.f ? std::clamp(round_half_away(values[i] / scale), -127.f, 127.f) : 0.f);
  scales[row] = scale;
}

void KvCache::store(int layer, int position, const float* key_row, const float* value_row) {
  for (int h = 0; h < kv_heads_; ++h) {
    const std::size_t row = row_index(layer, h, position);
    store_row(keys_, key_scales_, row, key_row + std::size_t(h) * head_dim_);
    store_row(values_, value_scales_, row, value_row + std::size_t(h) * head_dim_);
  }
}

}  // namespace qforge
