// The key/value cache of every layer, one contiguous block per kv head and sequence:
//
//   keys[layer][kv_head][sequence][position][head_dim]
//   values[layer][kv_head][sequence][position][head_dim]
//
// A head's attention reads its keys (then its values) as one sequential stream, rows
// head_dim elements apart. store() scatters a position's projected row
// [ head 0 | head 1 | ... ] (kv_dim = kv_heads x head_dim floats) into the blocks, in the
// cache's element type:
//
//   f32   the row as it is                                   4 bytes per value
//   bf16  each value rounded to nearest-even bf16            2 bytes per value
//   int8  KIVI's layout, over groups of kGroup positions:    1 byte per value, plus
//           keys    q = round(k / s), s = f16(max over the group's positions of
//                   |k[.][c]| / 127), one per (channel, group)  head_dim / kGroup f16 a row
//           values  q = round(v / s), s = f16(max|row| / 127)   one f16 per row
//         (each scale rounded to f16 once, the values quantized against the rounded one:
//         2 bytes of scale per 32 keys and per 64-value row, 0.26x f32's bytes)
//         A group is rounded when its last position is stored; until then its rows stay
//         f32 (the residual, kGroup rows a kv head and sequence). A query reads the groups
//         before its own as int8 and its own group's rows exactly:
//
//           query at p:   [ group 0 | group 1 | ... ]  [ p's group, up to p ]
//                          int8, scaled                  f32
//
//         so what a position sees does not depend on how the rows were batched.
//
// One forward call stores and reads one layer at a time:
//
//   begin_rows(layer); store(layer, s, p, k, v) for each row (a sequence's positions in
//   order); keys / values for each query row; end_rows(layer)
//
// int8 keeps the call's rows (with the rows before them in their first group) in an f32
// staging area of kGroup - 1 + rows_per_call rows per kv head and sequence, shared by the
// layers; end_rows moves each sequence's open group into its residual.
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
  static constexpr int kGroup = 32;  // int8: positions per key scale group (KIVI)

  // `positions` per sequence; `rows_per_call`: the most rows of one sequence one call
  // stores (int8's staging).
  KvCache(int layers, int positions, int kv_heads, int head_dim, KvType type = KvType::f32,
          int sequences = 1, int rows_per_call = 128);

  void begin_rows(int layer);
  void store(int layer, int sequence, int position, const float* key_row, const float* value_row);
  void end_rows(int layer);

  // What a query of `sequence` at `position` attends to: rows 0..position of a kv head.
  // int8: valid between begin_rows and end_rows of `layer`, for a position of the call.
  KvRows keys(int layer, int kv_head, int sequence, int position) const;
  KvRows values(int layer, int kv_head, int sequence, int position) const;

  // A kv head's rows of an f32 cache (sequence 0), writable: for experiments that round
  // cached rows in place between decode steps (bench/kv_key_scales.cpp).
  float* f32_keys(int layer, int kv_head) { return f32_rows(keys_, layer, kv_head); }
  float* f32_values(int layer, int kv_head) { return f32_rows(values_, layer, kv_head); }

  int positions() const { return positions_; }  // per sequence
  int sequences() const { return sequences_; }
  int kv_heads() const { return kv_heads_; }
  int head_dim() const { return head_dim_; }
  KvType type() const { return type_; }
  // Bytes held: rows, scales, and int8's residual and staging.
  std::uint64_t bytes() const;

 private:
  // Row index of (layer, kv head, sequence, position) in keys_ / values_.
  std::size_t row_index(int layer, int kv_head, int sequence, int position) const {
    return ((static_cast<std::size_t>(layer) * kv_heads_ + kv_head) * sequences_ + sequence) *
               positions_ +
           position;
  }
  std::size_t group_index(int layer, int kv_head, int sequence, int group) const {
    return ((static_cast<std::size_t>(layer) * kv_heads_ + kv_head) * sequences_ + sequence) *
               groups_ +
           group;
  }
  // Start of a (kv head, sequence)'s staging rows, or of a (layer, kv head, sequence)'s
  // residual rows, in floats.
  std::size_t staging_offset(int kv_head, int sequence) const {
    return (static_cast<std::size_t>(kv_head) * sequences_ + sequence) * staging_rows_ * head_dim_;
  }
  std::size_t residual_offset(int layer, int kv_head, int sequence) const {
    return ((static_cast<std::size_t>(layer) * kv_heads_ + kv_head) * sequences_ + sequence) *
           kGroup * head_dim_;
  }
  int group_end(int group) const;  // one past the group's last position
  KvRows rows(const std::vector<std::byte>& data, const std::uint16_t* row_scales, int layer,
              int kv_head, int sequence) const;
  float* f32_rows(std::vector<std::byte>& data, int layer, int kv_head);
  void store_row(std::vector<std::byte>& data, std::size_t row, const float* values);
  // int8
  void stage_open_rows(int layer, int sequence, int first, int position);
  void round_group(int layer, int sequence, int group);
  KvRows int8_rows(bool keys, int layer, int kv_head, int sequence, int position) const;

  int layers_;
  int positions_;
  int kv_heads_;
  int head_dim_;
  KvType type_;
  int sequences_;
  std::size_t element_bytes_;
  std::vector<std::byte> keys_, values_;
  // int8
  int groups_ = 0;                           // per sequence
  int staging_rows_ = 0;                     // per kv head and sequence
  std::vector<std::uint16_t> key_scales_;    // f16 [layer][kv head][sequence][group][head_dim]
  std::vector<std::uint16_t> value_scales_;  // f16, one per row
  std::vector<float> residual_keys_, residual_values_;  // [layer][kv head][sequence][kGroup]
  std::vector<int> residual_group_;  // [layer][sequence]: the group held, -1: none
  std::vector<int> residual_end_;    // [layer][sequence]: one past its last position held
  std::vector<float> staging_keys_, staging_values_;  // [kv head][sequence][staging_rows_]
  std::vector<int> staging_first_;  // [sequence]: position of staging row 0, -1: none
  std::vector<int> staging_count_;  // [sequence]
  std::vector<int> staging_kept_;   // [sequence]: leading rows the residual holds as they are
  int staging_layer_ = -1;
};

}  // namespace qforge
