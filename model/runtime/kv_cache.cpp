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

KvCache::KvCache(int layers, int positions, int kv_heads, int head_dim, KvType type, int sequences,
                 int rows_per_call)
    : layers_(layers),
      positions_(positions),
      kv_heads_(kv_heads),
      head_dim_(head_dim),
      type_(type),
      sequences_(sequences),
      element_bytes_(type == KvType::f32    ? 4
                     : type == KvType::bf16 ? 2
                                            : 1) {
  QF_REQUIRE(layers > 0 && positions > 0 && kv_heads > 0 && head_dim > 0 && sequences > 0 &&
                 rows_per_call > 0,
             "kv cache: bad shape ", layers, " x ", kv_heads, " x ", sequences, " x ", positions,
             " x ", head_dim);
  const std::size_t rows = static_cast<std::size_t>(layers) * kv_heads * sequences * positions;
  try {
    keys_.assign(rows * head_dim * element_bytes_, std::byte{0});
    values_.assign(keys_.size(), std::byte{0});
    if (type == KvType::int8) {
      groups_ = (positions + kGroup - 1) / kGroup;
      staging_rows_ = kGroup - 1 + std::min(rows_per_call, positions);
      const std::size_t heads = static_cast<std::size_t>(layers) * kv_heads * sequences;
      key_scales_.assign(heads * groups_ * head_dim, 0);
      value_scales_.assign(rows, 0);
      residual_keys_.assign(heads * kGroup * head_dim, 0.f);
      residual_values_.assign(residual_keys_.size(), 0.f);
      residual_group_.assign(static_cast<std::size_t>(layers) * sequences, -1);
      residual_end_.assign(residual_group_.size(), 0);
      staging_keys_.assign(
          static_cast<std::size_t>(kv_heads) * sequences * staging_rows_ * head_dim, 0.f);
      staging_values_.assign(staging_keys_.size(), 0.f);
      staging_first_.assign(static_cast<std::size_t>(sequences), -1);
      staging_count_.assign(staging_first_.size(), 0);
      staging_kept_.assign(staging_first_.size(), 0);
    }
  } catch (const std::bad_alloc&) {
    const double needed = static_cast<double>(rows) *
                          (2.0 * head_dim * element_bytes_ +
                           (type == KvType::int8 ? 2 * (2 + 2.0 * head_dim / kGroup) : 0));
    fail("not enough memory for the KV cache: ", positions, " positions x ", sequences,
         " sequences x ", layers, " layers x ", kv_heads, " heads (", to_string(type), ") need ",
         needed / (1 << 20), " MiB; a shorter context or an int8 cache (--kv int8) needs less");
  }
}

std::uint64_t KvCache::bytes() const {
  const std::size_t halves = key_scales_.size() + value_scales_.size();
  const std::size_t floats = residual_keys_.size() + residual_values_.size() +
                             staging_keys_.size() + staging_values_.size();
  return keys_.size() + values_.size() + halves * sizeof(std::uint16_t) + floats * sizeof(float);
}

int KvCache::group_end(int group) const {
  return std::min((group + 1) * kGroup, positions_);
}

KvRows KvCache::rows(const std::vector<std::byte>& data, const std::uint16_t* row_scales, int layer,
                     int kv_head, int sequence) const {
  const std::size_t row = row_index(layer, kv_head, sequence, 0);
  KvRows out;
  out.type = type_;
  out.data = data.data() + row * head_dim_ * element_bytes_;
  out.scales = row_scales == nullptr ? nullptr : row_scales + row;
  out.stride = head_dim_;
  return out;
}

float* KvCache::f32_rows(std::vector<std::byte>& data, int layer, int kv_head) {
  QF_REQUIRE(type_ == KvType::f32, "kv cache: writable rows of a ", to_string(type_), " cache");
  return reinterpret_cast<float*>(data.data() + row_index(layer, kv_head, 0, 0) * head_dim_ * 4);
}

void KvCache::store_row(std::vector<std::byte>& data, std::size_t row, const float* values) {
  std::byte* out = data.data() + row * head_dim_ * element_bytes_;
  if (type_ == KvType::f32) {
    std::memcpy(out, values, sizeof(float) * static_cast<std::size_t>(head_dim_));
    return;
  }
  auto* bf16 = reinterpret_cast<std::uint16_t*>(out);
  for (int i = 0; i < head_dim_; ++i) bf16[i] = f32_to_bf16(values[i]);
}

void KvCache::begin_rows(int layer) {
  if (type_ != KvType::int8) return;
  staging_layer_ = layer;
  std::fill(staging_first_.begin(), staging_first_.end(), -1);
  std::fill(staging_count_.begin(), staging_count_.end(), 0);
}

void KvCache::store(int layer, int sequence, int position, const float* key_row,
                    const float* value_row) {
  QF_REQUIRE(layer >= 0 && layer < layers_ && sequence >= 0 && sequence < sequences_ &&
                 position >= 0 && position < positions_,
             "kv cache: layer ", layer, ", sequence ", sequence, ", position ", position,
             " outside the cache");
  if (type_ != KvType::int8) {
    for (int h = 0; h < kv_heads_; ++h) {
      const std::size_t row = row_index(layer, h, sequence, position);
      store_row(keys_, row, key_row + std::size_t(h) * head_dim_);
      store_row(values_, row, value_row + std::size_t(h) * head_dim_);
    }
    return;
  }
  QF_REQUIRE(staging_layer_ == layer, "kv cache: layer ", layer, " stored outside begin_rows");
  const auto s = static_cast<std::size_t>(sequence);
  if (staging_first_[s] < 0) {
    stage_open_rows(layer, sequence, position / kGroup * kGroup, position);
  } else {
    QF_REQUIRE(position == staging_first_[s] + staging_count_[s], "kv cache: sequence ", sequence,
               " stores position ", position, " after ", staging_first_[s] + staging_count_[s] - 1,
               " (a sequence's rows come in position order)");
  }
  QF_REQUIRE(staging_count_[s] < staging_rows_, "kv cache: more than ", staging_rows_ - kGroup + 1,
             " rows of sequence ", sequence, " in one call");
  const std::size_t at = std::size_t(staging_count_[s]) * head_dim_;
  for (int h = 0; h < kv_heads_; ++h) {
    const std::size_t offset = staging_offset(h, sequence) + at;
    std::copy_n(key_row + std::size_t(h) * head_dim_, head_dim_, staging_keys_.data() + offset);
    std::copy_n(value_row + std::size_t(h) * head_dim_, head_dim_, staging_values_.data() + offset);
  }
  ++staging_count_[s];
  if (position + 1 == group_end(position / kGroup)) round_group(layer, sequence, position / kGroup);
}

// A sequence's first row of the call, at `position`: the rows before it in its group,
// [first, position), go to the staging area first, from the residual when it holds them
// (the group was open), else decoded from the int8 rows (the call went back into a group
// that was rounded already).
void KvCache::stage_open_rows(int layer, int sequence, int first, int position) {
  const auto s = static_cast<std::size_t>(sequence);
  staging_first_[s] = first;
  staging_count_[s] = position - first;
  const std::size_t state = static_cast<std::size_t>(layer) * sequences_ + s;
  const bool held = residual_group_[state] == first / kGroup;
  staging_kept_[s] = held ? std::max(0, std::min(position, residual_end_[state]) - first) : 0;
  for (int h = 0; h < kv_heads_; ++h) {
    const std::size_t stage = staging_offset(h, sequence);
    const std::size_t residual = residual_offset(layer, h, sequence);
    const std::uint16_t* channel =
        key_scales_.data() + group_index(layer, h, sequence, first / kGroup) * head_dim_;
    for (int p = first; p < position; ++p) {
      float* key = staging_keys_.data() + stage + std::size_t(p - first) * head_dim_;
      float* value = staging_values_.data() + stage + std::size_t(p - first) * head_dim_;
      if (held && p < residual_end_[state]) {
        std::copy_n(residual_keys_.data() + residual + std::size_t(p - first) * head_dim_,
                    head_dim_, key);
        std::copy_n(residual_values_.data() + residual + std::size_t(p - first) * head_dim_,
                    head_dim_, value);
        continue;
      }
      const std::size_t row = row_index(layer, h, sequence, p);
      const auto* k = reinterpret_cast<const std::int8_t*>(keys_.data()) + row * head_dim_;
      const auto* v = reinterpret_cast<const std::int8_t*>(values_.data()) + row * head_dim_;
      const float value_scale = f16_to_f32(value_scales_[row]);
      for (int c = 0; c < head_dim_; ++c) {
        key[c] = f16_to_f32(channel[c]) * static_cast<float>(k[c]);
        value[c] = value_scale * static_cast<float>(v[c]);
      }
    }
  }
}

namespace {

std::int8_t round_to_int8(float x, float scale) {
  return static_cast<std::int8_t>(
      scale > 0.f ? std::clamp(round_half_away(x / scale), -127.f, 127.f) : 0.f);
}

// absmax / 127 as the f16 the cache keeps (at most the largest f16: values beyond
// 127 x 65504 saturate at +-127).
std::uint16_t f16_scale(float absmax) {
  return f32_to_f16(std::min(absmax / 127.f, kLargestF16));
}

}  // namespace

// Group `group`'s rows (all in the staging area) to int8: keys with one scale per channel
// over the group, values with one scale per row.
void KvCache::round_group(int layer, int sequence, int group) {
  const int first = group * kGroup, count = group_end(group) - first;
  const std::size_t staged = std::size_t(first - staging_first_[std::size_t(sequence)]) * head_dim_;
  for (int h = 0; h < kv_heads_; ++h) {
    const float* keys = staging_keys_.data() + staging_offset(h, sequence) + staged;
    const float* values = staging_values_.data() + staging_offset(h, sequence) + staged;
    const std::size_t row0 = row_index(layer, h, sequence, first);
    auto* k = reinterpret_cast<std::int8_t*>(keys_.data()) + row0 * head_dim_;
    auto* v = reinterpret_cast<std::int8_t*>(values_.data()) + row0 * head_dim_;
    std::uint16_t* channel =
        key_scales_.data() + group_index(layer, h, sequence, group) * head_dim_;
    for (int c = 0; c < head_dim_; ++c) {
      float absmax = 0.f;
      for (int p = 0; p < count; ++p) absmax = std::max(absmax, std::abs(keys[p * head_dim_ + c]));
      channel[c] = f16_scale(absmax);
      const float scale = f16_to_f32(channel[c]);
      for (int p = 0; p < count; ++p)
        k[p * head_dim_ + c] = round_to_int8(keys[p * head_dim_ + c], scale);
    }
    for (int p = 0; p < count; ++p) {
      const float* row = values + std::size_t(p) * head_dim_;
      float absmax = 0.f;
      for (int c = 0; c < head_dim_; ++c) absmax = std::max(absmax, std::abs(row[c]));
      value_scales_[row0 + p] = f16_scale(absmax);
      const float scale = f16_to_f32(value_scales_[row0 + p]);
      for (int c = 0; c < head_dim_; ++c) v[p * head_dim_ + c] = round_to_int8(row[c], scale);
    }
  }
}

// Each sequence's open group (its last position not the group's last) becomes its
// residual for the next call.
void KvCache::end_rows(int layer) {
  if (type_ != KvType::int8) return;
  QF_REQUIRE(staging_layer_ == layer, "kv cache: end_rows(", layer, ") without begin_rows");
  for (int sequence = 0; sequence < sequences_; ++sequence) {
    const auto s = static_cast<std::size_t>(sequence);
    if (staging_first_[s] < 0) continue;
    const int last = staging_first_[s] + staging_count_[s] - 1, group = last / kGroup;
    const std::size_t state = static_cast<std::size_t>(layer) * sequences_ + s;
    if (last + 1 == group_end(group)) {
      residual_group_[state] = -1;
      residual_end_[state] = 0;
      continue;
    }
    // Rows the residual already holds (a decode step's group) are not copied again.
    const int first = group * kGroup;
    const int kept = first == staging_first_[s] ? staging_kept_[s] : 0;
    const std::size_t staged = std::size_t(first - staging_first_[s] + kept) * head_dim_;
    const std::size_t floats = std::size_t(last + 1 - first - kept) * head_dim_;
    for (int h = 0; h < kv_heads_; ++h) {
      const std::size_t from = staging_offset(h, sequence) + staged;
      const std::size_t to = residual_offset(layer, h, sequence) + std::size_t(kept) * head_dim_;
      std::copy_n(staging_keys_.data() + from, floats, residual_keys_.data() + to);
      std::copy_n(staging_values_.data() + from, floats, residual_values_.data() + to);
    }
    residual_group_[state] = group;
    residual_end_[state] = last + 1;
  }
  staging_layer_ = -1;
}

KvRows KvCache::keys(int layer, int kv_head, int sequence, int position) const {
  if (type_ == KvType::int8) return int8_rows(true, layer, kv_head, sequence, position);
  return rows(keys_, nullptr, layer, kv_head, sequence);
}

KvRows KvCache::values(int layer, int kv_head, int sequence, int position) const {
  if (type_ == KvType::int8) return int8_rows(false, layer, kv_head, sequence, position);
  return rows(values_, nullptr, layer, kv_head, sequence);
}

KvRows KvCache::int8_rows(bool keys, int layer, int kv_head, int sequence, int position) const {
  const auto s = static_cast<std::size_t>(sequence);
  const int first = position / kGroup * kGroup;
  QF_REQUIRE(staging_layer_ == layer && staging_first_[s] >= 0 && first >= staging_first_[s] &&
                 position < staging_first_[s] + staging_count_[s],
             "kv cache: rows of layer ", layer, ", sequence ", sequence, " at position ", position,
             " read outside the call that stored them");
  KvRows out =
      rows(keys ? keys_ : values_, keys ? nullptr : value_scales_.data(), layer, kv_head, sequence);
  if (keys) {
    out.channel_scales = key_scales_.data() + group_index(layer, kv_head, sequence, 0) * head_dim_;
    out.group = kGroup;
  }
  out.exact = (keys ? staging_keys_ : staging_values_).data() + staging_offset(kv_head, sequence) +
              std::size_t(first - staging_first_[s]) * head_dim_;
  out.exact_from = first;
  return out;
}

}  // namespace qforge
