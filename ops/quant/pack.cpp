#include "ops/quant/pack.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/base/parallel_for.h"
#include "ops/quant/group_rows.h"
#include "ops/quant/quantize_fast.h"

namespace qforge {

int operand_of(int q, int bits, bool asymmetric) {
  return asymmetric ? q : q - stored_min(bits, false);
}

int value_of_operand(int operand, int bits, bool asymmetric) {
  return asymmetric ? operand : operand + stored_min(bits, false);
}

int packed_operand(const std::uint8_t* group, int bits, int lane, std::int64_t i) {
  if (bits == 8) return group[(i / 4) * kRowBytes + lane * 4 + i % 4];
  if (bits == 5) {  // chunk of 32 k: 4 nibble rows, then the fifth-bit row
    const std::uint8_t* chunk = group + (i / kBitPlaneK) * kBitPlaneK * panel_bytes_per_k(5);
    const std::int64_t k = i % kBitPlaneK;
    const int low = packed_operand(chunk, 4, lane, k);
    const int bit = static_cast<int>((k / 4) * 64 + lane * 4 + k % 4);  // (2r + h) * 64 + b
    return low | (chunk[4 * kRowBytes + bit / 8] >> (bit % 8) & 1) << 4;
  }
  const std::uint8_t byte = group[(i / 8) * kRowBytes + lane * 4 + i % 4];
  return (i % 8) < 4 ? (byte & 0xf) : (byte >> 4);
}

namespace {
float load_f16(const std::uint8_t* at) {
  std::uint16_t half;
  std::memcpy(&half, at, 2);
  return f16_to_f32(half);
}
}  // namespace

float group_scale(const std::uint8_t* group_trailer, int lane) {
  return load_f16(group_trailer + kTrailerScales + 2 * lane);
}

float group_offset(const std::uint8_t* group_trailer, int lane) {
  return load_f16(group_trailer + kTrailerOffset + 2 * lane);
}

const std::uint8_t* packed_group(const std::uint8_t* panel, const PackedGeometry& geo,
                                 std::int64_t j) {
  return panel + geo.group_offset(j);
}

namespace {
// The scale (offset: false) or offset (true) of lane c of group j: the trailer's f16, or
// two-level, the trailer's s8 times its super-block header's f16.
float packed_param(const std::uint8_t* panel, const PackedGeometry& geo, std::int64_t j, int lane,
                   bool offset) {
  const std::uint8_t* trailer = packed_group(panel, geo, j) + geo.group_data_bytes;
  if (geo.superblock_groups == 0)
    return offset ? group_offset(trailer, lane) : group_scale(trailer, lane);
  const std::uint8_t* header = panel + geo.super_header_offset(j / geo.superblock_groups);
  const auto sub =
      static_cast<std::int8_t>(trailer[(offset ? kTrailerSubOffsets : kTrailerSubScales) + lane]);
  return static_cast<float>(sub) *
         load_f16(header + (offset ? kSuperOffsets : kSuperScales) + 2 * lane);
}
}  // namespace

float packed_scale(const std::uint8_t* panel, const PackedGeometry& geo, std::int64_t j, int lane) {
  return packed_param(panel, geo, j, lane, false);
}

float packed_offset(const std::uint8_t* panel, const PackedGeometry& geo, std::int64_t j,
                    int lane) {
  return packed_param(panel, geo, j, lane, true);
}

namespace {

// One group of a panel before it is laid out: the operand bytes of its 16 columns,
// operands[c * g + i] = operand_of(q of column c, element i), and their params.
struct PanelGroup {
  std::vector<std::uint8_t> operands;
  GroupParams params[kPanelWidth];
  std::vector<GroupParams> block[kPanelWidth];  // two-level: a super-block's params per lane
};

void store_f16(std::uint8_t* at, float value) {
  const std::uint16_t half = f32_to_f16(value);
  std::memcpy(at, &half, 2);
}

// Writes group j (rows + trailer) of the panel at `panel`; for two-level scales, the
// super-block's header with its first group, and a check that the later groups share it.
void write_group(std::uint8_t* panel, std::int64_t j, const PanelGroup& pg, const PackedHeader& h,
                 const PackedGeometry& geo) {
  const bool asym = h.asymmetric != 0;
  std::uint8_t* dst = panel + geo.group_offset(j);
  write_group_rows(dst, pg.operands.data(), h.group, h.bits);
  std::uint8_t* trailer = dst + geo.group_data_bytes;
  if (geo.superblock_groups == 0) {
    for (int c = 0; c < kPanelWidth; ++c) {
      store_f16(trailer + kTrailerScales + 2 * c, pg.params[c].scale);
      if (asym)
        store_f16(trailer + kTrailerOffset + 2 * c, asymmetric_offset(pg.params[c], h.bits));
    }
    return;
  }
  std::uint8_t* header = panel + geo.super_header_offset(j / geo.superblock_groups);
  const bool first = j % geo.superblock_groups == 0;
  for (int c = 0; c < kPanelWidth; ++c) {
    const GroupParams& p = pg.params[c];
    trailer[kTrailerSubScales + c] = static_cast<std::uint8_t>(p.sub_scale);
    trailer[kTrailerSubOffsets + c] = asym ? static_cast<std::uint8_t>(p.sub_offset) : 0;
    const std::uint16_t scale = f32_to_f16(p.super_scale), offset = f32_to_f16(p.super_offset);
    QF_REQUIRE(
        f16_to_f32(scale) == p.super_scale && (!asym || f16_to_f32(offset) == p.super_offset),
        "pack: the super-block scale ", p.super_scale, " / offset ", p.super_offset, " of lane ", c,
        " is not an f16");
    if (first) {
      std::memcpy(header + kSuperScales + 2 * c, &scale, 2);
      if (asym) std::memcpy(header + kSuperOffsets + 2 * c, &offset, 2);
      continue;
    }
    std::uint16_t stored_scale, stored_offset = offset;
    std::memcpy(&stored_scale, header + kSuperScales + 2 * c, 2);
    if (asym) std::memcpy(&stored_offset, header + kSuperOffsets + 2 * c, 2);
    QF_REQUIRE(stored_scale == scale && stored_offset == offset, "pack: group ", j, " of lane ", c,
               " does not share its super-block's scale and offset");
  }
}

// The operands of a column that lies past N: zero, with params {0, 0}.
void write_padding_column(PanelGroup& pg, int c, std::int64_t g, int offset) {
  pg.params[c] = GroupParams{};
  std::fill_n(pg.operands.data() + c * g, g, static_cast<std::uint8_t>(offset));
}

// Maps packed panel P and lane c to (half, logical column); column < 0 is padding.
struct PanelColumn {
  int half;
  std::int64_t column;
};
PanelColumn panel_column(const PackedHeader& h, std::int64_t panel, int lane) {
  const bool pair = h.interleaved_pair != 0;
  const int half = pair ? static_cast<int>(panel % 2) : 0;
  const std::int64_t p = pair ? panel / 2 : panel;
  const std::int64_t column = p * kPanelWidth + lane;
  return {half, column < h.n ? column : -1};
}

PackedWeights allocate(const PackedHeader& h) {
  PackedWeights packed;
  packed.header = h;
  packed.geometry = geometry_of(h);
  // Every byte of every group is written by write_group.
  packed.data.resize_for_overwrite(static_cast<std::size_t>(packed.geometry.total_bytes));
  return packed;
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : default_load_threads();
}

// The float sources of packing: one matrix, or gate + up of an interleaved pair, whose
// row `first_row` is source row 0; with per-tensor scales, each one's single params.
struct FloatSources {
  const float* rows[2] = {nullptr, nullptr};
  std::int64_t first_row = 0;
  GroupParams tensor_params[2];
};

// The params of one row's super-block starting at k0 (two-level scales): each group's
// one-level range, then f16 super values of the largest magnitudes over 127 and integer
// parts rounded outward, so every group's range stays covered:
//   symmetric   scale_j = ceil(s_j / S) * S,  S = f16 up (max_j s_j / 127)
//   asymmetric  offset_j = ceil(lo_j / O) * O <= lo_j  (O = -f16 up (max_j |lo_j| / 127)),
//               then scale_j as above for (hi_j - offset_j) / q_max
void choose_two_level_params(const float* row, std::int64_t k, std::int64_t k0,
                             const PackedHeader& h, const PackedGeometry& geo,
                             std::vector<GroupParams>& out) {
  const std::int64_t g = h.group, groups = geo.superblock_groups;
  const bool asym = h.asymmetric != 0;
  const float q_max = static_cast<float>(stored_max(h.bits, asym));
  std::vector<float> lo(groups, 0.f), hi(groups, 0.f), needed(groups, 0.f);
  float largest_lo = 0.f;
  for (std::int64_t j = 0; j < groups; ++j) {
    const std::int64_t first = k0 + j * g,
                       count = std::max<std::int64_t>(0, std::min(g, k - first));
    require_finite(row + first, count, "pack: weights");
    for (std::int64_t i = 0; i < count; ++i) {
      lo[j] = std::min(lo[j], row[first + i]);
      hi[j] = std::max(hi[j], row[first + i]);
    }
    largest_lo = std::max(largest_lo, -lo[j]);
  }
  const float super_offset = asym ? -round_scale_to_f16(largest_lo / 127.f) : 0.f;
  std::vector<int> sub_offset(groups, 0);
  float largest = 0.f;
  for (std::int64_t j = 0; j < groups; ++j) {
    if (asym && super_offset != 0.f)
      sub_offset[j] = static_cast<int>(std::min(127.f, std::ceil(lo[j] / super_offset)));
    const float offset = static_cast<float>(sub_offset[j]) * super_offset;
    needed[j] = asym ? (hi[j] - offset) / q_max : std::max(-lo[j], hi[j]) / q_max;
    largest = std::max(largest, needed[j]);
  }
  const float super_scale = round_scale_to_f16(largest / 127.f);
  out.resize(static_cast<std::size_t>(groups));
  for (std::int64_t j = 0; j < groups; ++j) {
    const int sub_scale =
        super_scale == 0.f ? 0
                           : static_cast<int>(std::min(127.f, std::ceil(needed[j] / super_scale)));
    out[static_cast<std::size_t>(j)] = two_level_params(
        sub_scale, super_scale, sub_offset[static_cast<std::size_t>(j)], super_offset);
  }
}

// The operands of one two-level group: q = clamp(round((w - offset) / scale)), the group's
// padding quantized as 0 would be.
void quantize_two_level(const float* values, std::int64_t count, std::int64_t group,
                        const GroupParams& p, const PackedHeader& h, std::uint8_t* operands) {
  const bool asym = h.asymmetric != 0;
  const float q_min = static_cast<float>(quantize_min(h.bits, asym));
  const float q_max = static_cast<float>(stored_max(h.bits, asym));
  const int bias = operand_of(0, h.bits, asym);
  auto operand = [&](float w) {
    const float q = p.scale == 0.f ? 0.f : std::round((w - p.offset) / p.scale);
    return static_cast<std::uint8_t>(static_cast<int>(std::clamp(q, q_min, q_max)) + bias);
  };
  for (std::int64_t i = 0; i < count; ++i) operands[i] = operand(values[i]);
  std::fill(operands + count, operands + group, operand(0.f));
}

// Quantizes panels [panel_begin, panel_end) of `packed` from `src` (on this thread;
// `pg` is its scratch).
void pack_panels(PackedWeights& packed, const FloatSources& src, std::int64_t panel_begin,
                 std::int64_t panel_end, PanelGroup& pg) {
  const PackedHeader& h = packed.header;
  const PackedGeometry& geo = packed.geometry;
  const bool per_tensor = scheme_of(h).granularity == Granularity::per_tensor;
  const std::int64_t k = h.k, g = h.group;
  const int offset = operand_of(0, h.bits, h.asymmetric);
  pg.operands.resize(kPanelWidth * g);
  const std::int64_t super_groups = geo.superblock_groups;
  for (std::int64_t panel = panel_begin; panel < panel_end; ++panel) {
    std::uint8_t* dst = packed.data.data() + panel * geo.panel_bytes;
    for (std::int64_t j = 0; j < geo.groups; ++j) {
      const std::int64_t k0 = j * g, count = std::max<std::int64_t>(0, std::min(g, k - k0));
      for (int c = 0; c < kPanelWidth; ++c) {
        const PanelColumn pc = panel_column(h, panel, c);
        if (pc.column < 0) {
          write_padding_column(pg, c, g, offset);
          continue;
        }
        const float* row = src.rows[pc.half] + (pc.column - src.first_row) * k;
        if (super_groups != 0) {  // the super-block's params, once, at its first group
          if (j % super_groups == 0) choose_two_level_params(row, k, k0, h, geo, pg.block[c]);
          pg.params[c] = pg.block[c][static_cast<std::size_t>(j % super_groups)];
          quantize_two_level(row + k0, count, g, pg.params[c], h, pg.operands.data() + c * g);
          continue;
        }
        const float* values = row + k0;
        bool finite = true;
        const GroupParams p =
            per_tensor ? src.tensor_params[pc.half]
                       : choose_group_params_fast(values, count, h.bits, h.asymmetric, &finite);
        if (!finite)  // locate it: the message names the row and the element
          require_finite(values, count,
                         ("pack: weights row " + std::to_string(pc.column) + " from element " +
                          std::to_string(k0))
                             .c_str());
        pg.params[c] = p;
        quantize_operands_fast(values, count, g, p, h.bits, h.asymmetric, offset,
                               pg.operands.data() + c * g);
      }
      write_group(dst, j, pg, h, geo);
    }
  }
}

// Quantizes whole float matrices (one, or gate + up) into `packed`, panels in parallel.
void pack_from_float(PackedWeights& packed, const float* const matrices[2], int threads) {
  const PackedHeader& h = packed.header;
  FloatSources src;
  for (int s = 0; s < (h.interleaved_pair ? 2 : 1); ++s) {
    QF_REQUIRE(matrices[s] != nullptr, "pack: weights pointer is null");
    src.rows[s] = matrices[s];
    // Per-group scales check each group as they read it; one scale for the tensor needs
    // the whole of it first.
    if (scheme_of(h).granularity != Granularity::per_tensor) continue;
    require_finite(matrices[s], h.n * h.k, "pack: weights");
    src.tensor_params[s] = choose_group_params(matrices[s], h.n * h.k, h.bits, h.asymmetric);
  }
  parallel_for(packed.geometry.panels, resolve_threads(threads),
               [&](std::int64_t begin, std::int64_t end) {
                 PanelGroup pg;
                 pack_panels(packed, src, begin, end, pg);
               });
}

}  // namespace

PackedWeights pack_weights(const float* weights, std::int64_t n, std::int64_t k,
                           const QuantScheme& scheme, int threads) {
  PackedWeights packed = allocate(make_packed_header(n, k, scheme));
  const float* sources[2] = {weights, nullptr};
  pack_from_float(packed, sources, threads);
  return packed;
}

namespace {

// Maps the pages of [data, data + bytes) in one call rather than one fault each (a
// fault costs most of the time of writing a fresh page).
void populate_for_write(std::uint8_t* data, std::int64_t bytes) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<std::uintptr_t>(data) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(data) + static_cast<std::uintptr_t>(bytes);
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE);  // a hint
}

// Packs `packed` 16 rows at a time (a block: one panel, or a panel pair of an
// interleaved pair). Each thread converts the rows of its block into a buffer of its own
// (16 x K floats per source, which stays in L2) and packs them at once, so a matrix is
// never whole in f32 and the floats are read back from cache.
PackedWeights pack_by_rows(PackedWeights packed, const RowSource* const rows[2], int threads) {
  const PackedHeader& h = packed.header;
  QF_REQUIRE(scheme_of(h).granularity != Granularity::per_tensor,
             "pack: per-tensor scales need the whole matrix at once");
  const std::int64_t n = h.n, k = h.k;
  const int halves = h.interleaved_pair ? 2 : 1;
  const std::int64_t blocks = (n + kPanelWidth - 1) / kPanelWidth;
  parallel_for(blocks, resolve_threads(threads), [&](std::int64_t begin, std::int64_t end) {
    // Left uninitialised: a row source fills every float of the rows it is asked for.
    std::unique_ptr<float[]> block[2];
    FloatSources src;
    for (int s = 0; s < halves; ++s) {
      block[s] = std::make_unique_for_overwrite<float[]>(static_cast<std::size_t>(kPanelWidth * k));
      src.rows[s] = block[s].get();
    }
    PanelGroup pg;
    for (std::int64_t b = begin; b < end; ++b) {
      src.first_row = b * kPanelWidth;
      const std::int64_t count = std::min<std::int64_t>(kPanelWidth, n - src.first_row);
      for (int s = 0; s < halves; ++s) (*rows[s])(src.first_row, count, block[s].get());
      populate_for_write(packed.data.data() + b * halves * packed.geometry.panel_bytes,
                         halves * packed.geometry.panel_bytes);
      pack_panels(packed, src, b * halves, (b + 1) * halves, pg);
    }
  });
  return packed;
}

}  // namespace

PackedWeights pack_weights_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                   const RowSource& rows, int threads) {
  QF_REQUIRE(scheme.granularity != Granularity::per_tensor,
             "pack: per-tensor scales need the whole matrix at once");
  const RowSource* const sources[2] = {&rows, nullptr};
  return pack_by_rows(allocate(make_packed_header(n, k, scheme)), sources, threads);
}

PackedWeights pack_swiglu_pair_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                       const RowSource& gate_rows, const RowSource& up_rows,
                                       int threads) {
  QF_REQUIRE(scheme.granularity != Granularity::per_tensor,
             "pack: per-tensor scales need the whole matrix at once");
  const RowSource* const sources[2] = {&gate_rows, &up_rows};
  return pack_by_rows(allocate(make_packed_header(n, k, scheme, /*interleaved_pair=*/true)),
                      sources, threads);
}

PackedWeights pack_swiglu_pair(const float* gate, const float* up, std::int64_t n, std::int64_t k,
                               const QuantScheme& scheme, int threads) {
  PackedWeights packed = allocate(make_packed_header(n, k, scheme, /*interleaved_pair=*/true));
  const float* sources[2] = {gate, up};
  pack_from_float(packed, sources, threads);
  return packed;
}

namespace {

// Packs already quantized tensors (one, or gate + up of an interleaved pair) into `packed`.
void pack_from_quantized(PackedWeights& packed, const QuantizedTensor* const sources[2],
                         int threads) {
  const PackedHeader& h = packed.header;
  const PackedGeometry& geo = packed.geometry;
  QF_REQUIRE(geo.superblock_groups == 0, "pack: a quantized tensor's float scales cannot be ",
             "split into two-level scales (", to_string(scheme_of(h)), ")");
  const int halves = h.interleaved_pair ? 2 : 1;
  for (int s = 0; s < halves; ++s) {
    const QuantizedTensor& t = *sources[s];
    QF_REQUIRE(
        t.n == h.n && t.k == h.k && t.scheme == sources[0]->scheme && t.k_padded == h.k_padded &&
            t.group == h.group && static_cast<std::int64_t>(t.q.size()) == t.n * t.k_padded &&
            static_cast<std::int64_t>(t.scales.size()) == t.n * geo.groups &&
            static_cast<std::int64_t>(t.zero_points.size()) == t.n * geo.groups &&
            (t.offsets.empty() || static_cast<std::int64_t>(t.offsets.size()) == t.n * geo.groups),
        "pack: quantized tensor sizes do not match its scheme (N ", t.n, ", K ", t.k, ")");
    QF_REQUIRE(t.offsets.empty() || (h.bits != 8 && h.asymmetric),
               "pack: float offsets need an int4 or int5 asymmetric scheme, not ",
               to_string(t.scheme));
  }
  const int q_min = stored_min(h.bits, h.asymmetric);
  const int q_max = stored_max(h.bits, h.asymmetric);
  parallel_for(geo.panels, resolve_threads(threads), [&](std::int64_t begin, std::int64_t end) {
    PanelGroup pg;
    pg.operands.resize(kPanelWidth * h.group);
    const int offset = operand_of(0, h.bits, h.asymmetric);
    for (std::int64_t panel = begin; panel < end; ++panel) {
      std::uint8_t* dst = packed.data.data() + panel * geo.panel_bytes;
      for (std::int64_t j = 0; j < geo.groups; ++j) {
        for (int c = 0; c < kPanelWidth; ++c) {
          const PanelColumn pc = panel_column(h, panel, c);
          const std::int64_t column = pc.column;
          if (column < 0) {
            write_padding_column(pg, c, h.group, offset);
            continue;
          }
          const QuantizedTensor& t = *sources[pc.half];
          const std::int64_t gi = column * geo.groups + j;
          pg.params[c] = {t.scales[gi], t.zero_points[gi], t.offsets.empty() ? 0.f : t.offsets[gi]};
          const std::int16_t* src = t.q.data() + column * t.k_padded + j * h.group;
          std::uint8_t* operands = pg.operands.data() + c * h.group;
          for (std::int64_t i = 0; i < h.group; ++i) {
            QF_REQUIRE(src[i] >= q_min && src[i] <= q_max, "pack: value ", src[i], " at [", column,
                       "][", j * h.group + i, "] is outside [", q_min, ", ", q_max, "]");
            operands[i] = static_cast<std::uint8_t>(src[i] + offset);
          }
        }
        write_group(dst, j, pg, h, geo);
      }
    }
  });
}

}  // namespace

namespace {

// pack_by_rows for rows already quantized: each thread fills 16 rows of operands and
// params (per source) and copies them into the panel groups.
PackedWeights pack_operands(PackedWeights packed, const OperandRowSource* const rows[2],
                            int threads) {
  const PackedHeader& h = packed.header;
  const PackedGeometry& geo = packed.geometry;
  const std::int64_t n = h.n, kp = h.k_padded, g = h.group, groups = geo.groups;
  const int halves = h.interleaved_pair ? 2 : 1;
  const std::int64_t blocks = (n + kPanelWidth - 1) / kPanelWidth;
  parallel_for(blocks, resolve_threads(threads), [&](std::int64_t begin, std::int64_t end) {
    std::unique_ptr<std::uint8_t[]> operands[2];
    std::unique_ptr<GroupParams[]> params[2];
    for (int s = 0; s < halves; ++s) {
      operands[s] = std::make_unique_for_overwrite<std::uint8_t[]>(
          static_cast<std::size_t>(kPanelWidth * kp));
      params[s] = std::make_unique<GroupParams[]>(static_cast<std::size_t>(kPanelWidth * groups));
    }
    PanelGroup pg;
    pg.operands.resize(static_cast<std::size_t>(kPanelWidth * g));
    const int offset = operand_of(0, h.bits, h.asymmetric);
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int64_t first = b * kPanelWidth;
      const std::int64_t count = std::min<std::int64_t>(kPanelWidth, n - first);
      for (int s = 0; s < halves; ++s) (*rows[s])(first, count, operands[s].get(), params[s].get());
      populate_for_write(packed.data.data() + b * halves * geo.panel_bytes,
                         halves * geo.panel_bytes);
      for (std::int64_t panel = b * halves; panel < (b + 1) * halves; ++panel) {
        std::uint8_t* dst = packed.data.data() + panel * geo.panel_bytes;
        for (std::int64_t j = 0; j < groups; ++j) {
          for (int c = 0; c < kPanelWidth; ++c) {
            const PanelColumn pc = panel_column(h, panel, c);
            if (pc.column < 0) {
              write_padding_column(pg, c, g, offset);
              continue;
            }
            const std::int64_t r = pc.column - first;
            pg.params[c] = params[pc.half][static_cast<std::size_t>(r * groups + j)];
            std::memcpy(pg.operands.data() + c * g, operands[pc.half].get() + r * kp + j * g,
                        static_cast<std::size_t>(g));
          }
          write_group(dst, j, pg, h, geo);
        }
      }
    }
  });
  return packed;
}

}  // namespace

PackedWeights pack_operands_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                    const OperandRowSource& rows, int threads) {
  const OperandRowSource* const sources[2] = {&rows, nullptr};
  return pack_operands(allocate(make_packed_header(n, k, scheme)), sources, threads);
}

PackedWeights pack_operand_pair_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                        const OperandRowSource& gate_rows,
                                        const OperandRowSource& up_rows, int threads) {
  const OperandRowSource* const sources[2] = {&gate_rows, &up_rows};
  return pack_operands(allocate(make_packed_header(n, k, scheme, /*interleaved_pair=*/true)),
                       sources, threads);
}

PackedWeights pack_quantized(const QuantizedTensor& t, int threads) {
  PackedWeights packed = allocate(make_packed_header(t.n, t.k, t.scheme));
  const QuantizedTensor* sources[2] = {&t, nullptr};
  pack_from_quantized(packed, sources, threads);
  return packed;
}

PackedWeights pack_quantized_pair(const QuantizedTensor& gate, const QuantizedTensor& up,
                                  int threads) {
  PackedWeights packed =
      allocate(make_packed_header(gate.n, gate.k, gate.scheme, /*interleaved_pair=*/true));
  const QuantizedTensor* sources[2] = {&gate, &up};
  pack_from_quantized(packed, sources, threads);
  return packed;
}

QuantizedTensor unpack_weights(const PackedWeights& packed, int half) {
  const PackedHeader& h = packed.header;
  const PackedGeometry& geo = packed.geometry;
  QF_REQUIRE(half == 0 || (half == 1 && h.interleaved_pair), "unpack: no half ", half);
  QuantizedTensor t;
  t.scheme = scheme_of(h);
  t.n = h.n;
  t.k = h.k;
  t.k_padded = h.k_padded;
  t.group = h.group;
  t.q.assign(t.n * t.k_padded, 0);
  t.scales.assign(t.n * geo.groups, 0.f);
  t.zero_points.assign(t.n * geo.groups, 0);
  // Offsets are read as integer zero points while every group's offset is one; otherwise
  // (GGUF Q4_1) the whole tensor keeps its float offsets.
  std::vector<float> offsets(t.n * geo.groups, 0.f);
  bool integer_zero_points = true;
  const bool asym = h.asymmetric != 0;
  for (std::int64_t panel = 0; panel < geo.panels; ++panel) {
    for (std::int64_t j = 0; j < geo.groups; ++j) {
      const std::uint8_t* group = packed_group(packed.panel(panel), geo, j);
      for (int c = 0; c < kPanelWidth; ++c) {
        const PanelColumn pc = panel_column(h, panel, c);
        if (pc.column < 0 || pc.half != half) continue;
        for (std::int64_t i = 0; i < h.group; ++i)
          t.q[pc.column * t.k_padded + j * h.group + i] = static_cast<std::int16_t>(
              value_of_operand(packed_operand(group, h.bits, c, i), h.bits, asym));
        const float scale = packed_scale(packed.panel(panel), geo, j, c);
        const float offset = asym ? packed_offset(packed.panel(panel), geo, j, c) : 0.f;
        const std::int64_t gi = pc.column * geo.groups + j;
        t.scales[gi] = scale;
        offsets[gi] = offset;
        if (!asym) continue;
        if (geo.superblock_groups != 0) {  // two-level offsets are float minima
          integer_zero_points = false;
          continue;
        }
        // The integer zero point whose offset this is, if there is one (else a Q4_1 minimum).
        GroupParams p{scale, 0, 0.f};
        const float ratio = scale != 0.f ? offset / scale : 0.f;
        if (std::isfinite(ratio) && std::fabs(ratio) <= 256.f) {
          const int zero_coef = static_cast<int>(std::round(ratio));
          p.zero_point = h.bits == 8 ? 128 - zero_coef : -zero_coef;
        }
        const int z_max = stored_max(h.bits, true);
        if (p.zero_point >= 0 && p.zero_point <= z_max && asymmetric_offset(p, h.bits) == offset)
          t.zero_points[gi] = p.zero_point;
        else
          integer_zero_points = false;
      }
    }
  }
  if (!integer_zero_points) {
    QF_REQUIRE(h.bits != 8, "unpack: an int8 asymmetric offset is not scale * (128 - z)");
    std::fill(t.zero_points.begin(), t.zero_points.end(), 0);
    t.offsets = std::move(offsets);
  }
  return t;
}

}  // namespace qforge
