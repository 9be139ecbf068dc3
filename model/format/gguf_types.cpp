#include "model/format/gguf_types.h"

#include "jit/base/error.h"

namespace qforge {

namespace {

// Block geometry of every ggml type (ggml-common.h block structs).
constexpr GgmlTypeTraits kGgmlTypes[] = {
    {GgmlType::F32, "F32", 1, 4, true},
    {GgmlType::F16, "F16", 1, 2, true},
    {GgmlType::Q4_0, "Q4_0", 32, 18, true},
    {GgmlType::Q4_1, "Q4_1", 32, 20, true},
    {GgmlType::Q5_0, "Q5_0", 32, 22, true},
    {GgmlType::Q5_1, "Q5_1", 32, 24, true},
    {GgmlType::Q8_0, "Q8_0", 32, 34, true},
    {GgmlType::Q8_1, "Q8_1", 32, 36, false},
    {GgmlType::Q2_K, "Q2_K", 256, 84, true},
    {GgmlType::Q3_K, "Q3_K", 256, 110, true},
    {GgmlType::Q4_K, "Q4_K", 256, 144, true},
    {GgmlType::Q5_K, "Q5_K", 256, 176, true},
    {GgmlType::Q6_K, "Q6_K", 256, 210, true},
    {GgmlType::Q8_K, "Q8_K", 256, 292, false},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, false},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74, false},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, false},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50, false},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18, false},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110, false},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82, false},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136, false},
    {GgmlType::I8, "I8", 1, 1, false},
    {GgmlType::I16, "I16", 1, 2, false},
    {GgmlType::I32, "I32", 1, 4, false},
    {GgmlType::I64, "I64", 1, 8, false},
    {GgmlType::F64, "F64", 1, 8, false},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56, false},
    {GgmlType::BF16, "BF16", 1, 2, true},
    {GgmlType::TQ1_0, "TQ1_0", 256, 54, false},
    {GgmlType::TQ2_0, "TQ2_0", 256, 66, false},
    {GgmlType::MXFP4, "MXFP4", 32, 17, false},
};

constexpr std::string_view kValueTypeNames[] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

}  // namespace

bool is_known_gguf_value_type(std::uint32_t id) {
  return id <= static_cast<std::uint32_t>(GgufValueType::Float64);
}

std::string_view gguf_value_type_name(GgufValueType type) {
  const auto id = static_cast<std::uint32_t>(type);
  return is_known_gguf_value_type(id) ? kValueTypeNames[id] : std::string_view("unknown");
}

std::size_t gguf_scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::UInt8:
    case GgufValueType::Int8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::UInt16:
    case GgufValueType::Int16:
      return 2;
    case GgufValueType::UInt32:
    case GgufValueType::Int32:
    case GgufValueType::Float32:
      return 4;
    case GgufValueType::UInt64:
    case GgufValueType::Int64:
    case GgufValueType::Float64:
      return 8;
    case GgufValueType::String:
    case GgufValueType::Array:
      return 0;
  }
  return 0;
}

bool is_integer(GgufValueType type) {
  switch (type) {
    case GgufValueType::UInt8:
    case GgufValueType::Int8:
    case GgufValueType::UInt16:
    case GgufValueType::Int16:
    case GgufValueType::UInt32:
    case GgufValueType::Int32:
    case GgufValueType::UInt64:
    case GgufValueType::Int64:
      return true;
    default:
      return false;
  }
}

bool is_floating(GgufValueType type) {
  return type == GgufValueType::Float32 || type == GgufValueType::Float64;
}

const GgmlTypeTraits* find_ggml_type(std::uint32_t id) {
  for (const GgmlTypeTraits& traits : kGgmlTypes) {
    if (static_cast<std::uint32_t>(traits.type) == id) return &traits;
  }
  return nullptr;
}

const GgmlTypeTraits& ggml_type_traits(GgmlType type) {
  const GgmlTypeTraits* traits = find_ggml_type(static_cast<std::uint32_t>(type));
  if (!traits) fail("unknown ggml type id ", static_cast<std::uint32_t>(type));
  return *traits;
}

std::string_view ggml_type_name(GgmlType type) {
  const GgmlTypeTraits* traits = find_ggml_type(static_cast<std::uint32_t>(type));
  return traits ? traits->name : std::string_view("unknown");
}

bool is_supported(GgmlType type) {
  const GgmlTypeTraits* traits = find_ggml_type(static_cast<std::uint32_t>(type));
  return traits && traits->supported;
}

std::uint64_t ggml_row_bytes(GgmlType type, std::uint64_t values) {
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  if (values % traits.block_values != 0)
    fail(values, " values are not a whole number of ", traits.name, " blocks (",
         traits.block_values, " values each)");
  return values / traits.block_values * traits.block_bytes;
}

std::string GgufTensorInfo::shape_string() const {
  std::string out = "[";
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    if (d) out += ", ";
    out += std::to_string(dims[d]);
  }
  return out + "]";
}

}  // namespace qforge
