#include "model/format/ggml_repack.h"

#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/ggml_kquant_repack.h"
#include "model/format/ggml_kquants.h"
#include "model/format/ggml_quants.h"

namespace qforge {

std::optional<QuantScheme> native_scheme(GgmlType type) {
  if (const std::optional<QuantScheme> two_level = kquant_scheme(type)) return two_level;
  QuantScheme scheme;
  scheme.granularity = Granularity::per_group;
  scheme.group = 32;
  scheme.asymmetric = false;
  if (type == GgmlType::Q8_0) {
    scheme.bits = 8;
    return scheme;
  }
  if (type == GgmlType::Q4_0 || type == GgmlType::Q4_1) {
    scheme.bits = 4;
    scheme.asymmetric = type == GgmlType::Q4_1;
    return scheme;
  }
  if (type == GgmlType::Q5_0 || type == GgmlType::Q5_1) {
    scheme.bits = 5;
    scheme.asymmetric = type == GgmlType::Q5_1;
    return scheme;
  }
  return std::nullopt;
}

std::optional<QuantScheme> native_scheme(const TensorView& tensor) {
  if (tensor.encoded) return tensor.encoded->geometry.scheme;
  return native_scheme(tensor.type);
}

namespace {

// The encoded tensors stacked (their geometry agreeing).
QuantizedTensor stacked_encoded(std::span<const TensorView* const> tensors) {
  const TensorView& first = *tensors[0];
  const EncodedGeometry& g = first.encoded->geometry;
  std::int64_t n = 0;
  for (const TensorView* t : tensors) {
    QF_REQUIRE(
        t->encoded && t->encoded->geometry.scheme == g.scheme && t->columns == first.columns,
        "repack: tensor '", t->name, "' (",
        t->encoded ? to_string(t->encoded->geometry.scheme) : std::string(ggml_type_name(t->type)),
        ", ", t->columns, " columns) does not match '", first.name, "' (", to_string(g.scheme),
        ", ", first.columns, " columns)");
    n += t->rows;
  }
  QuantizedTensor out = zero_quantized_tensor(n, first.columns, g.scheme);
  std::int64_t at = 0;
  for (const TensorView* t : tensors) {
    decode_encoded_rows(*t->encoded, out, at);
    at += t->rows;
  }
  return out;
}

// The ggml tensors stacked as a QuantizedTensor: their operands and params read as the
// packing reads them (native_operand_rows), turned into values, scales and (asymmetric)
// float offsets.
QuantizedTensor operand_rows_quantized(std::span<const TensorView* const> tensors,
                                       const QuantScheme& scheme) {
  std::int64_t n = 0;
  for (const TensorView* t : tensors) n += t->rows;
  QuantizedTensor out = zero_quantized_tensor(n, tensors[0]->columns, scheme);
  if (scheme.asymmetric) out.offsets.assign(out.scales.size(), 0.f);
  const OperandRowSource rows = native_operand_rows(tensors);
  std::vector<std::uint8_t> operands(static_cast<std::size_t>(out.k_padded));
  std::vector<GroupParams> params(static_cast<std::size_t>(out.groups()));
  for (std::int64_t r = 0; r < n; ++r) {
    rows(r, 1, operands.data(), params.data());
    for (std::int64_t i = 0; i < out.k_padded; ++i)
      out.q[static_cast<std::size_t>(r * out.k_padded + i)] = static_cast<std::int16_t>(
          value_of_operand(operands[static_cast<std::size_t>(i)], scheme.bits, scheme.asymmetric));
    for (std::int64_t j = 0; j < out.groups(); ++j) {
      const std::size_t at = static_cast<std::size_t>(r * out.groups() + j);
      out.scales[at] = params[static_cast<std::size_t>(j)].scale;
      if (scheme.asymmetric) out.offsets[at] = params[static_cast<std::size_t>(j)].offset;
    }
  }
  return out;
}

}  // namespace

QuantizedTensor native_quantized(std::span<const TensorView* const> tensors) {
  QF_REQUIRE(!tensors.empty(), "repack: no tensors");
  const TensorView& first = *tensors[0];
  if (first.encoded) return stacked_encoded(tensors);
  const std::optional<QuantScheme> scheme = native_scheme(first.type);
  if (!scheme)
    fail("repack: tensor '", first.name, "' type ", ggml_type_name(first.type),
         " has no exact qforge layout");
  return operand_rows_quantized(tensors, *scheme);
}

namespace {

// Row `r` of one tensor as K_p operands and its groups' params.
void native_row(const TensorView& t, std::int64_t r, std::uint8_t* operands, GroupParams* params) {
  if (t.encoded) {
    const EncodedTensor& e = *t.encoded;
    const EncodedGeometry& g = e.geometry;
    const std::byte* row = e.operands + static_cast<std::uint64_t>(r) * g.row_bytes();
    if (g.scheme.bits != 4) {
      std::memcpy(operands, row, static_cast<std::size_t>(g.k_padded));
    } else {
      for (std::int64_t j = 0; j < g.k_padded / 2; ++j) {
        const auto byte = std::to_integer<std::uint8_t>(row[j]);
        operands[2 * j] = byte & 15;
        operands[2 * j + 1] = byte >> 4;
      }
    }
    for (std::int64_t j = 0; j < g.groups(); ++j) {
      const std::uint64_t at = static_cast<std::uint64_t>(r * g.groups() + j);
      std::memcpy(&params[j].scale, e.scales + at * sizeof(float), sizeof(float));
      params[j].zero_point = g.scheme.asymmetric ? std::to_integer<int>(e.zeros[at]) : 0;
      params[j].offset = 0.f;
    }
    return;
  }
  const std::span<const std::byte> row = t.row(r);
  if (const std::optional<QuantScheme> two_level = kquant_scheme(t.type)) {
    const std::uint64_t block_bytes = ggml_type_traits(t.type).block_bytes;
    const std::int64_t groups = kSuperBlockValues / two_level->group;
    for (std::int64_t b = 0; b < t.columns / std::int64_t{kSuperBlockValues}; ++b) {
      const std::string what = "repack: tensor '" + t.name + "' row " + std::to_string(r) +
                               " super-block " + std::to_string(b);
      kquant_block_operands(t.type, row.data() + b * block_bytes,
                            operands + b * std::int64_t{kSuperBlockValues}, params + b * groups,
                            what.c_str());
    }
    return;
  }
  // Blocks of 32: f16 d, (f16 m: Q4_1, Q5_1), (u32 qh: Q5_0, Q5_1), then the values.
  const bool with_min = t.type == GgmlType::Q4_1 || t.type == GgmlType::Q5_1;
  const bool five_bits = t.type == GgmlType::Q5_0 || t.type == GgmlType::Q5_1;
  const std::uint64_t block_bytes = ggml_type_traits(t.type).block_bytes;
  const std::int64_t blocks = t.columns / 32;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::uint8_t* op = operands + b * 32;
    const std::byte* block = row.data() + b * block_bytes;
    std::uint16_t d_bits, m_bits = 0;
    std::memcpy(&d_bits, block, 2);
    if (with_min) std::memcpy(&m_bits, block + 2, 2);
    const std::byte* values = block + (with_min ? 4 : 2);
    if (t.type == GgmlType::Q8_0) {
      for (int i = 0; i < 32; ++i)  // int8 q + 128: the sign bit flipped
        op[i] = static_cast<std::uint8_t>(std::to_integer<std::uint8_t>(values[i]) ^ 0x80);
    } else {  // the value is the operand (q + 8 for Q4_0, q + 16 for Q5_0, q for Q4_1, Q5_1)
      std::uint32_t qh = 0;  // value i's fifth bit is bit i
      if (five_bits) {
        std::memcpy(&qh, values, 4);
        values += 4;
      }
      for (int j = 0; j < 16; ++j) {
        const auto byte = std::to_integer<std::uint8_t>(values[j]);
        op[j] = static_cast<std::uint8_t>((byte & 15) | (qh >> j & 1) << 4);
        op[j + 16] = static_cast<std::uint8_t>((byte >> 4) | (qh >> (j + 16) & 1) << 4);
      }
    }
    const float d = f16_to_f32(d_bits), m = f16_to_f32(m_bits);
    if (!std::isfinite(d) || !std::isfinite(m))
      fail("repack: tensor '", t.name, "' row ", r, " block ", b, " has scale ", d,
           with_min ? " and minimum " : "", with_min ? std::to_string(m) : "");
    params[b] = {d, 0, m};
  }
}

}  // namespace

OperandRowSource native_operand_rows(std::span<const TensorView* const> tensors) {
  QF_REQUIRE(!tensors.empty(), "repack: no tensors");
  const TensorView& first = *tensors[0];
  const std::optional<QuantScheme> scheme = native_scheme(first);
  if (!scheme)
    fail("repack: tensor '", first.name, "' type ", ggml_type_name(first.type),
         " has no exact qforge layout");
  std::vector<const TensorView*> parts(tensors.begin(), tensors.end());
  std::vector<std::int64_t> starts;  // the first stacked row of each part
  std::int64_t n = 0;
  for (const TensorView* t : parts) {
    if (native_scheme(*t) != scheme || t->type != first.type || t->columns != first.columns)
      fail("repack: tensor '", t->name, "' (", ggml_type_name(t->type), ", ", t->columns,
           " columns) does not match '", first.name, "' (", ggml_type_name(first.type), ", ",
           first.columns, " columns)");
    starts.push_back(n);
    n += t->rows;
  }
  const EncodedGeometry g = encoded_geometry(n, first.columns, *scheme);
  const std::int64_t block = kquant_scheme(first.type) ? std::int64_t{kSuperBlockValues} : 32;
  QF_REQUIRE(first.encoded || first.columns % block == 0, "repack: '", first.name, "' has ",
             first.columns, " columns, not whole blocks");
  return [parts, starts, g](std::int64_t row, std::int64_t count, std::uint8_t* operands,
                            GroupParams* params) {
    for (std::int64_t i = 0; i < count; ++i, ++row) {
      std::size_t p = 0;
      while (p + 1 < starts.size() && row >= starts[p + 1]) ++p;
      native_row(*parts[p], row - starts[p], operands + i * g.k_padded, params + i * g.groups());
    }
  };
}

}  // namespace qforge
