#include "ops/quant/pack.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "ops/quant/quantize_fast.h"

namespace qforge {

int operand_of(int q, int bits, bool asymmetric) {
  if (bits == 8) return asymmetric ? q - 128 : q;
  return asymmetric ? q : q + 8;
}

int value_of_operand(int operand, int bits, bool asymmetric) {
  if (bits == 8) return asymmetric ? operand + 128 : operand;
  return asymmetric ? operand : operand - 8;
}

int zero_coef_of(int zero_point, int bits, bool asymmetric) {
  if (bits == 8) return asymmetric ? 128 - zero_point : 0;
  return asymmetric ? -zero_point : -8;
}

namespace {

// Stored values of one group for the 16 columns of a panel: q[c * g + i].
struct PanelGroup {
  std::vector<std::int16_t> q;
  GroupParams params[kPanelWidth];
};

// Writes one group (rows + trailer) at `dst`.
void write_group(std::uint8_t* dst, const PanelGroup& pg, const PackedHeader& h,
                 const PackedGeometry& geo) {
  const int bits = h.bits;
  const bool asym = h.asymmetric != 0;
  const std::int64_t g = h.group;
  std::uint8_t* trailer = dst + geo.group_data_bytes;
  for (int c = 0; c < kPanelWidth; ++c) {
    const std::int16_t* q = pg.q.data() + c * g;
    // operand = q + offset (see the table in packed_layout.h); one 4-byte store per row:
    // 4 k of this column (int8), or 8 k as nibble pairs (int4).
    const int offset = operand_of(0, bits, asym);
    std::int32_t operand_sum = 0;
    if (bits == 8) {
      for (std::int64_t i = 0; i < g; i += 4) {
        std::uint32_t word = 0;
        for (int j = 0; j < 4; ++j) {
          const int operand = q[i + j] + offset;
          operand_sum += operand;
          word |= std::uint32_t(std::uint8_t(operand)) << (8 * j);
        }
        std::memcpy(dst + (i / 4) * kRowBytes + c * 4, &word, 4);
      }
    } else {
      for (std::int64_t i = 0; i < g; i += 8) {
        std::uint32_t word = 0;
        for (int j = 0; j < 4; ++j) {
          const int low = q[i + j] + offset, high = q[i + 4 + j] + offset;
          operand_sum += low + high;
          word |= std::uint32_t(low | high << 4) << (8 * j);
        }
        std::memcpy(dst + (i / 8) * kRowBytes + c * 4, &word, 4);
      }
    }
    const float scale = pg.params[c].scale;
    const std::int32_t comp = 128 * operand_sum;
    const std::int32_t zc = zero_coef_of(pg.params[c].zero_point, bits, asym);
    std::memcpy(trailer + kTrailerScales + 4 * c, &scale, 4);
    std::memcpy(trailer + kTrailerComp + 4 * c, &comp, 4);
    if (asym) std::memcpy(trailer + kTrailerZeroCoef + 4 * c, &zc, 4);
  }
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
  packed.data.resize(static_cast<std::size_t>(packed.geometry.total_bytes));
  return packed;
}

int resolve_threads(int threads) {
  return threads > 0 ? threads : default_load_threads();
}

// Quantizes float matrices (one, or gate + up) into `packed`: panels
// [panel_begin, panel_end), whose rows of W start at row `first_row` of the sources
// (rows_available rows there). The whole matrix by default.
void pack_from_float(PackedWeights& packed, const float* const sources[2], int threads,
                     std::int64_t panel_begin = 0, std::int64_t panel_end = -1,
                     std::int64_t first_row = 0, std::int64_t rows_available = -1) {
  const PackedHeader& h = packed.header;
  const PackedGeometry& geo = packed.geometry;
  const QuantScheme scheme = scheme_of(h);
  const std::int64_t k = h.k, g = h.group;
  const int halves = h.interleaved_pair ? 2 : 1;
  if (panel_end < 0) panel_end = geo.panels;
  if (rows_available < 0) rows_available = h.n;
  // Per-group scales check each group as they read it (below); one scale for the tensor
  // needs the whole of it first.
  const bool per_tensor = scheme.granularity == Granularity::per_tensor;
  GroupParams tensor_params[2];
  for (int s = 0; s < halves; ++s) {
    QF_REQUIRE(sources[s] != nullptr, "pack: weights pointer is null");
    if (!per_tensor) continue;
    require_finite(sources[s], rows_available * k, "pack: weights");
    tensor_params[s] = choose_group_params(sources[s], h.n * k, h.bits, h.asymmetric);
  }

  parallel_for(
      panel_end - panel_begin, resolve_threads(threads), [&](std::int64_t begin, std::int64_t end) {
        PanelGroup pg;
        pg.q.resize(kPanelWidth * g);
        for (std::int64_t panel = panel_begin + begin; panel < panel_begin + end; ++panel) {
          std::uint8_t* dst = packed.data.data() + panel * geo.panel_bytes;
          for (std::int64_t j = 0; j < geo.groups; ++j, dst += geo.group_bytes) {
            const std::int64_t k0 = j * g, count = std::min(g, k - k0);
            for (int c = 0; c < kPanelWidth; ++c) {
              const PanelColumn pc = panel_column(h, panel, c);
              std::int16_t* q = pg.q.data() + c * g;
              if (pc.column < 0) {
                pg.params[c] = GroupParams{};
                std::fill(q, q + g, std::int16_t{0});
                continue;
              }
              const float* values = sources[pc.half] + (pc.column - first_row) * k + k0;
              bool finite = true;
              const GroupParams p = per_tensor ? tensor_params[pc.half]
                                               : choose_group_params_fast(values, count, h.bits,
                                                                          h.asymmetric, &finite);
              if (!finite)  // locate it: the message names the row and the element
                require_finite(values, count,
                               ("pack: weights row " + std::to_string(pc.column) +
                                " from element " + std::to_string(k0))
                                   .c_str());
              pg.params[c] = p;
              quantize_group_fast(values, count, g, p, h.bits, h.asymmetric, q);
            }
            write_group(dst, pg, h, geo);
          }
        }
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

// Packs `packed` a chunk of rows at a time: about 16 MiB of floats per source per chunk,
// a whole number of 16-row blocks (panels, or panel pairs of an interleaved pair).
PackedWeights pack_by_rows(PackedWeights packed, const RowSource* const rows[2], int threads) {
  const PackedHeader& h = packed.header;
  QF_REQUIRE(scheme_of(h).granularity != Granularity::per_tensor,
             "pack: per-tensor scales need the whole matrix at once");
  const std::int64_t n = h.n, k = h.k;
  const int halves = h.interleaved_pair ? 2 : 1;
  const std::int64_t blocks = (n + kPanelWidth - 1) / kPanelWidth;
  const std::int64_t blocks_per_chunk = std::max<std::int64_t>(
      1, (std::int64_t{4} << 20) / (kPanelWidth * std::max<std::int64_t>(k, 1)));
  std::vector<float> chunk[2];
  for (std::int64_t b = 0; b < blocks; b += blocks_per_chunk) {
    const std::int64_t b_end = std::min(blocks, b + blocks_per_chunk);
    const std::int64_t first = b * kPanelWidth, count = std::min(n, b_end * kPanelWidth) - first;
    const float* sources[2] = {nullptr, nullptr};
    for (int s = 0; s < halves; ++s) {
      chunk[s].resize(static_cast<std::size_t>(count * k));
      (*rows[s])(first, count, chunk[s].data());
      sources[s] = chunk[s].data();
    }
    pack_from_float(packed, sources, threads, b * halves, b_end * halves, first, count);
  }
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
  const int halves = h.interleaved_pair ? 2 : 1;
  for (int s = 0; s < halves; ++s) {
    const QuantizedTensor& t = *sources[s];
    QF_REQUIRE(t.n == h.n && t.k == h.k && t.scheme == sources[0]->scheme &&
                   t.k_padded == h.k_padded && t.group == h.group &&
                   static_cast<std::int64_t>(t.q.size()) == t.n * t.k_padded &&
                   static_cast<std::int64_t>(t.scales.size()) == t.n * geo.groups &&
                   static_cast<std::int64_t>(t.zero_points.size()) == t.n * geo.groups,
               "pack: quantized tensor sizes do not match its scheme (N ", t.n, ", K ", t.k, ")");
  }
  const int q_min = h.bits == 8 ? (h.asymmetric ? 0 : -128) : (h.asymmetric ? 0 : -8);
  const int q_max = h.bits == 8 ? (h.asymmetric ? 255 : 127) : (h.asymmetric ? 15 : 7);
  parallel_for(geo.panels, resolve_threads(threads), [&](std::int64_t begin, std::int64_t end) {
    PanelGroup pg;
    pg.q.resize(kPanelWidth * h.group);
    for (std::int64_t panel = begin; panel < end; ++panel) {
      std::uint8_t* dst = packed.data.data() + panel * geo.panel_bytes;
      for (std::int64_t j = 0; j < geo.groups; ++j, dst += geo.group_bytes) {
        for (int c = 0; c < kPanelWidth; ++c) {
          const PanelColumn pc = panel_column(h, panel, c);
          const std::int64_t column = pc.column;
          std::int16_t* q = pg.q.data() + c * h.group;
          if (column < 0) {
            pg.params[c] = GroupParams{};
            std::fill(q, q + h.group, std::int16_t{0});
            continue;
          }
          const QuantizedTensor& t = *sources[pc.half];
          const std::int64_t gi = column * geo.groups + j;
          pg.params[c] = {t.scales[gi], t.zero_points[gi]};
          const std::int16_t* src = t.q.data() + column * t.k_padded + j * h.group;
          for (std::int64_t i = 0; i < h.group; ++i) {
            QF_REQUIRE(src[i] >= q_min && src[i] <= q_max, "pack: value ", src[i], " at [", column,
                       "][", j * h.group + i, "] is outside [", q_min, ", ", q_max, "]");
            q[i] = src[i];
          }
        }
        write_group(dst, pg, h, geo);
      }
    }
  });
}

}  // namespace

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
  const bool asym = h.asymmetric != 0;
  for (std::int64_t panel = 0; panel < geo.panels; ++panel) {
    const std::uint8_t* group = packed.panel(panel);
    for (std::int64_t j = 0; j < geo.groups; ++j, group += geo.group_bytes) {
      const std::uint8_t* trailer = group + geo.group_data_bytes;
      for (int c = 0; c < kPanelWidth; ++c) {
        const PanelColumn pc = panel_column(h, panel, c);
        if (pc.column < 0 || pc.half != half) continue;
        std::int32_t operand_sum = 0;
        for (std::int64_t i = 0; i < h.group; ++i) {
          int operand;
          if (h.bits == 8) {
            operand = static_cast<std::int8_t>(group[(i / 4) * kRowBytes + c * 4 + i % 4]);
          } else {
            const std::uint8_t byte = group[(i / 8) * kRowBytes + c * 4 + i % 4];
            operand = (i % 8) < 4 ? (byte & 0xf) : (byte >> 4);
          }
          operand_sum += operand;
          t.q[pc.column * t.k_padded + j * h.group + i] =
              static_cast<std::int16_t>(value_of_operand(operand, h.bits, asym));
        }
        std::int32_t comp, zc = zero_coef_of(0, h.bits, false);
        float scale;
        std::memcpy(&scale, trailer + kTrailerScales + 4 * c, 4);
        std::memcpy(&comp, trailer + kTrailerComp + 4 * c, 4);
        if (asym) std::memcpy(&zc, trailer + kTrailerZeroCoef + 4 * c, 4);
        QF_REQUIRE(comp == 128 * operand_sum, "unpack: panel ", panel, " group ", j, " column ", c,
                   ": compensation sum ", comp, " != 128 * ", operand_sum);
        const std::int64_t gi = pc.column * geo.groups + j;
        t.scales[gi] = scale;
        t.zero_points[gi] = !asym ? 0 : (h.bits == 8 ? 128 - zc : -zc);
      }
    }
  }
  return t;
}

}  // namespace qforge
