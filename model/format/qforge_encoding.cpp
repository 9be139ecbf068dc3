#include "model/format/qforge_encoding.h"

#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "ops/quant/pack.h"
#include "ops/quant/packed_layout.h"

namespace qforge {
namespace {

std::uint8_t byte_at(const std::byte* bytes, std::uint64_t i) {
  return std::to_integer<std::uint8_t>(bytes[i]);
}

float scale_at(const EncodedTensor& t, std::uint64_t i) {
  float s;
  std::memcpy(&s, t.scales + i * sizeof(float), sizeof(float));
  return s;
}

// Operand k of a row of operand bytes.
int operand_at(const std::byte* row, int bits, std::int64_t k) {
  if (bits != 4) return byte_at(row, static_cast<std::uint64_t>(k));
  const std::uint8_t byte = byte_at(row, static_cast<std::uint64_t>(k / 2));
  return k % 2 == 0 ? byte & 15 : byte >> 4;
}

}  // namespace

std::string encoded_key(std::string_view tensor, std::string_view field) {
  return std::string(kQforgeEncodedKey) + std::string(tensor) + "." + std::string(field);
}

std::string encoded_scale_name(std::string_view tensor) {
  return std::string(tensor) + ".scale";
}

std::string encoded_zero_name(std::string_view tensor) {
  return std::string(tensor) + ".zero";
}

std::uint64_t EncodedGeometry::row_bytes() const {
  return static_cast<std::uint64_t>(scheme.bits == 4 ? k_padded / 2 : k_padded);
}

EncodedGeometry encoded_geometry(std::int64_t n, std::int64_t k, const QuantScheme& scheme) {
  const PackedHeader h = make_packed_header(n, k, stored_form(scheme));
  EncodedGeometry g;
  g.scheme = stored_form(scheme);
  g.n = n;
  g.k = k;
  g.k_padded = h.k_padded;
  g.group = h.group;
  return g;
}

bool is_encoded_part(const GgufReader& gguf, std::string_view name) {
  for (std::string_view suffix : {".scale", ".zero"})
    if (name.ends_with(suffix) &&
        gguf.has(encoded_key(name.substr(0, name.size() - suffix.size()), "scheme")))
      return true;
  return false;
}

std::optional<EncodedTensor> read_encoded_tensor(const GgufReader& gguf,
                                                 const GgufTensorInfo& info) {
  const std::string scheme_key = encoded_key(info.name, "scheme");
  if (!gguf.has(scheme_key)) return std::nullopt;
  const std::string& path = gguf.path();
  QF_REQUIRE(gguf.has(kQforgeEncodingVersionKey), path, ": '", scheme_key, "' is set but '",
             kQforgeEncodingVersionKey, "' is missing (not a qforge-encoded file)");
  const std::uint32_t version = gguf.get_u32(kQforgeEncodingVersionKey);
  QF_REQUIRE(version == kQforgeEncodingVersion, path, ": '", kQforgeEncodingVersionKey,
             "' = ", version, ": this qforge reads encoding version ", kQforgeEncodingVersion,
             " (the file was written by another qforge; re-quantize the source model)");
  QuantScheme scheme;
  try {
    scheme = parse_quant_scheme(gguf.get_string(scheme_key), scheme_key);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
  QF_REQUIRE(!scheme.weight_only, path, ": '", scheme_key, "' names a weight-only scheme; ",
             "the file stores weights (choose weight-only with --quant woq-native)");
  const std::string columns_key = encoded_key(info.name, "columns");
  const std::uint64_t columns = gguf.get_u64(columns_key);
  QF_REQUIRE(info.n_dims == 2 && info.type == GgmlType::I8 && columns > 0 &&
                 columns <= (std::uint64_t{1} << 31),
             path, ": tensor '", info.name, "' (", ggml_type_name(info.type), " ",
             info.shape_string(), ", '", columns_key, "' = ", columns,
             ") is not an I8 matrix of operand rows");
  const auto n = static_cast<std::int64_t>(info.rows());
  EncodedTensor out;
  try {
    out.geometry = encoded_geometry(n, static_cast<std::int64_t>(columns), scheme);
  } catch (const Error& e) {
    fail(path, ": tensor '", info.name, "': ", e.what());
  }
  const EncodedGeometry& g = out.geometry;
  QF_REQUIRE(info.columns() == g.row_bytes(), path, ": tensor '", info.name, "' has rows of ",
             info.columns(), " bytes; ", columns, " columns of ", to_string(scheme), " take ",
             g.row_bytes());
  out.operands = gguf.raw_tensor_data(info).data();
  if (const auto method = gguf.find_string(encoded_key(info.name, "method"))) out.method = *method;

  // The parts beside the operands: type, shape, then every value.
  const auto part = [&](const std::string& name, GgmlType type) {
    const GgufTensorInfo* p = gguf.find_tensor(name);
    QF_REQUIRE(p != nullptr, path, ": tensor '", info.name, "' is encoded as ", to_string(scheme),
               " but its part '", name, "' is missing");
    QF_REQUIRE(p->type == type && p->n_dims == 2 &&
                   p->columns() == static_cast<std::uint64_t>(g.groups()) &&
                   p->rows() == static_cast<std::uint64_t>(n),
               path, ": tensor '", name, "' is ", ggml_type_name(p->type), " ", p->shape_string(),
               ", expected ", ggml_type_name(type), " [", g.groups(), ", ", n, "]");
    return gguf.raw_tensor_data(*p).data();
  };
  out.scales = part(encoded_scale_name(info.name), GgmlType::F32);
  const std::uint64_t entries = static_cast<std::uint64_t>(n * g.groups());
  // Symmetric scales carry a sign (int4 puts a group's extreme on -8: d = extreme / -8,
  // as Q4_0 does); an asymmetric group's range and zero point need d >= 0.
  for (std::uint64_t i = 0; i < entries; ++i) {
    const float s = scale_at(out, i);
    QF_REQUIRE(std::isfinite(s) && (s >= 0 || !scheme.asymmetric), path, ": tensor '",
               encoded_scale_name(info.name), "' row ", i / g.groups(), " group ", i % g.groups(),
               " holds the scale ", s,
               scheme.asymmetric ? " (expected finite and >= 0)" : " (expected finite)");
  }
  if (scheme.asymmetric) {
    out.zeros = part(encoded_zero_name(info.name), GgmlType::I8);
    const int top = stored_max(scheme.bits, true);
    for (std::uint64_t i = 0; i < entries; ++i)
      QF_REQUIRE(byte_at(out.zeros, i) <= top, path, ": tensor '", encoded_zero_name(info.name),
                 "' row ", i / g.groups(), " group ", i % g.groups(), " holds the zero point ",
                 int(byte_at(out.zeros, i)), " (at most ", top, ")");
  } else {
    QF_REQUIRE(gguf.find_tensor(encoded_zero_name(info.name)) == nullptr, path, ": tensor '",
               encoded_zero_name(info.name), "' is present but ", to_string(scheme),
               " is symmetric");
  }
  return out;
}

void decode_encoded_row(const EncodedTensor& t, std::int64_t row, std::span<float> out) {
  const EncodedGeometry& g = t.geometry;
  const int bits = g.scheme.bits;
  const bool asym = g.scheme.asymmetric;
  const std::byte* operands = t.operands + static_cast<std::uint64_t>(row) * g.row_bytes();
  // As `dequantize` (ops/quant/quantize.h): s * q, or s * v + the f16 offset.
  const int v_shift = asym && bits == 8 ? 128 : 0;
  for (std::int64_t j = 0; j < g.groups(); ++j) {
    const std::uint64_t at = static_cast<std::uint64_t>(row * g.groups() + j);
    GroupParams p{scale_at(t, at), asym ? byte_at(t.zeros, at) : 0, 0.f};
    const float offset = asym ? asymmetric_offset(p, bits) : 0.f;
    const std::int64_t end = std::min<std::int64_t>(g.k, (j + 1) * g.group);
    for (std::int64_t c = j * g.group; c < end; ++c) {
      const int q = value_of_operand(operand_at(operands, bits, c), bits, asym);
      out[static_cast<std::size_t>(c)] = asym ? p.scale * static_cast<float>(q - v_shift) + offset
                                              : p.scale * static_cast<float>(q);
    }
  }
}

void decode_encoded_rows(const EncodedTensor& t, QuantizedTensor& out, std::int64_t at) {
  const EncodedGeometry& g = t.geometry;
  const int bits = g.scheme.bits;
  const bool asym = g.scheme.asymmetric;
  for (std::int64_t r = 0; r < g.n; ++r) {
    const std::byte* operands = t.operands + static_cast<std::uint64_t>(r) * g.row_bytes();
    std::int16_t* q = out.q.data() + (at + r) * out.k_padded;
    for (std::int64_t c = 0; c < g.k_padded; ++c)
      q[c] = static_cast<std::int16_t>(value_of_operand(operand_at(operands, bits, c), bits, asym));
    for (std::int64_t j = 0; j < g.groups(); ++j) {
      const std::uint64_t i = static_cast<std::uint64_t>(r * g.groups() + j);
      const std::size_t o = static_cast<std::size_t>((at + r) * g.groups() + j);
      out.scales[o] = scale_at(t, i);
      out.zero_points[o] = asym ? byte_at(t.zeros, i) : 0;
    }
  }
}

void encode_operand_row(const std::uint8_t* operands, const EncodedGeometry& g, std::byte* out) {
  if (g.scheme.bits != 4) {
    std::memcpy(out, operands, static_cast<std::size_t>(g.k_padded));
    return;
  }
  for (std::int64_t j = 0; j < g.k_padded / 2; ++j)
    out[j] = static_cast<std::byte>(operands[2 * j] | operands[2 * j + 1] << 4);
}

}  // namespace qforge
