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

// A 32-value block's 16 nibble bytes: low nibbles are values 0..15, high ones 16..31.
void unpack_nibbles(const std::byte* bytes, int shift, std::int16_t* q) {
  for (int j = 0; j < 16; ++j) {
    const auto byte = std::to_integer<std::uint8_t>(bytes[j]);
    q[j] = static_cast<std::int16_t>((byte & 15) + shift);
    q[j + 16] = static_cast<std::int16_t>((byte >> 4) + shift);
  }
}

// The K-quant tensors stacked as a QuantizedTensor: their operands and two-level params
// read as the packing reads them (native_operand_rows), turned into values and scales.
QuantizedTensor kquant_quantized(std::span<const TensorView* const> tensors) {
  const QuantScheme scheme = *kquant_scheme(tensors[0]->type);
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
  if (kquant_scheme(first.type)) return kquant_quantized(tensors);
  const std::optional<QuantScheme> scheme = native_scheme(first.type);
  if (!scheme)
    fail("repack: tensor '", first.name, "' type ", ggml_type_name(first.type),
         " has no exact qforge layout");
  QuantizedTensor out;
  out.scheme = *scheme;
  out.k = first.columns;
  out.k_padded = first.columns;
  out.group = 32;
  for (const TensorView* t : tensors) {
    if (t->type != first.type || t->columns != first.columns || t->encoded)
      fail("repack: tensor '", t->name, "' (", ggml_type_name(t->type), ", ", t->columns,
           " columns) does not match '", first.name, "' (", ggml_type_name(first.type), ", ",
           first.columns, " columns)");
    out.n += t->rows;
  }
  QF_REQUIRE(out.k % 32 == 0, "repack: '", first.name, "' has ", out.k,
             " columns, not whole blocks");
  const std::int64_t blocks = out.k / 32;
  out.q.resize(std::size_t(out.n * out.k));
  out.scales.resize(std::size_t(out.n * blocks));
  out.zero_points.assign(std::size_t(out.n * blocks), 0);
  if (first.type == GgmlType::Q4_1) out.offsets.assign(std::size_t(out.n * blocks), 0.f);
  std::int64_t row_out = 0;
  for (const TensorView* t : tensors) {
    for (std::int64_t r = 0; r < t->rows; ++r, ++row_out) {
      const std::span<const std::byte> row = t->row(r);
      for (std::int64_t b = 0; b < blocks; ++b) {
        std::int16_t* q = out.q.data() + row_out * out.k + b * 32;
        std::uint16_t d_bits;
        if (t->type == GgmlType::Q8_0) {
          const std::byte* block = row.data() + b * kQ8_0BlockBytes;
          std::memcpy(&d_bits, block, 2);
          for (int i = 0; i < 32; ++i)
            q[i] = static_cast<std::int8_t>(std::to_integer<std::uint8_t>(block[2 + i]));
        } else if (t->type == GgmlType::Q4_0) {
          const std::byte* block = row.data() + b * kQ4_0BlockBytes;
          std::memcpy(&d_bits, block, 2);
          unpack_nibbles(block + 2, -8, q);
        } else {
          const std::byte* block = row.data() + b * kQ4_1BlockBytes;
          std::uint16_t m_bits;
          std::memcpy(&d_bits, block, 2);
          std::memcpy(&m_bits, block + 2, 2);
          unpack_nibbles(block + 4, 0, q);
          const float m = f16_to_f32(m_bits);
          if (!std::isfinite(m))
            fail("repack: tensor '", t->name, "' row ", r, " block ", b, " has minimum ", m);
          out.offsets[std::size_t(row_out * blocks + b)] = m;
        }
        const float d = f16_to_f32(d_bits);
        if (!std::isfinite(d))
          fail("repack: tensor '", t->name, "' row ", r, " block ", b, " has scale ", d);
        out.scales[std::size_t(row_out * blocks + b)] = d;
      }
    }
  }
  return out;
}

namespace {

// Row `r` of one tensor as K_p operands and its groups' params.
void native_row(const TensorView& t, std::int64_t r, std::uint8_t* operands, GroupParams* params) {
  if (t.encoded) {
    const EncodedTensor& e = *t.encoded;
    const EncodedGeometry& g = e.geometry;
    const std::byte* row = e.operands + static_cast<std::uint64_t>(r) * g.row_bytes();
    if (g.scheme.bits == 8) {
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
  const std::int64_t blocks = t.columns / 32;
  for (std::int64_t b = 0; b < blocks; ++b) {
    std::uint8_t* op = operands + b * 32;
    std::uint16_t d_bits, m_bits = 0;
    const std::byte* nibbles = nullptr;
    if (t.type == GgmlType::Q8_0) {
      const std::byte* block = row.data() + b * kQ8_0BlockBytes;
      std::memcpy(&d_bits, block, 2);
      for (int i = 0; i < 32; ++i)  // int8 q + 128: the sign bit flipped
        op[i] = static_cast<std::uint8_t>(std::to_integer<std::uint8_t>(block[2 + i]) ^ 0x80);
    } else if (t.type == GgmlType::Q4_0) {
      const std::byte* block = row.data() + b * kQ4_0BlockBytes;
      std::memcpy(&d_bits, block, 2);
      nibbles = block + 2;
    } else {
      const std::byte* block = row.data() + b * kQ4_1BlockBytes;
      std::memcpy(&d_bits, block, 2);
      std::memcpy(&m_bits, block + 2, 2);
      nibbles = block + 4;
    }
    if (nibbles != nullptr)  // the nibble is the operand (q + 8 for Q4_0, q for Q4_1)
      for (int j = 0; j < 16; ++j) {
        const auto byte = std::to_integer<std::uint8_t>(nibbles[j]);
        op[j] = byte & 15;
        op[j + 16] = byte >> 4;
      }
    const float d = f16_to_f32(d_bits), m = f16_to_f32(m_bits);
    if (!std::isfinite(d) || !std::isfinite(m))
      fail("repack: tensor '", t.name, "' row ", r, " block ", b, " has scale ", d,
           t.type == GgmlType::Q4_1 ? " and minimum " : "",
           t.type == GgmlType::Q4_1 ? std::to_string(m) : "");
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
