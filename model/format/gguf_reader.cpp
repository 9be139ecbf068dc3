// GgufReader accessors: typed metadata getters and tensor lookup. Parsing lives in
// gguf_parser.cpp.
#include "model/format/gguf_reader.h"

#include <cmath>
#include <limits>

#include "jit/base/error.h"

namespace qforge {

namespace {

constexpr std::string_view kU32 = "an integer that fits in uint32";
constexpr std::string_view kU64 = "a non-negative integer";
constexpr std::string_view kI32 = "an integer that fits in int32";
constexpr std::string_view kI64 = "an integer that fits in int64";
constexpr std::string_view kFloat = "a number";

}  // namespace

const GgufValue* GgufReader::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufValue& GgufReader::get(std::string_view key) const {
  const GgufValue* value = find(key);
  if (!value) fail(path(), ": metadata key '", key, "' is missing");
  return *value;
}

void GgufReader::fail_value(std::string_view key, const GgufValue& value,
                            std::string_view expected) const {
  fail(path(), ": metadata '", key, "' is ", value.describe(), ", expected ", expected);
}

std::uint64_t GgufReader::unsigned_value(std::string_view key, const GgufValue& value,
                                         std::uint64_t max, std::string_view expected) const {
  std::uint64_t result = 0;
  if (!value.to_uint64(result) || result > max) fail_value(key, value, expected);
  return result;
}

std::int64_t GgufReader::signed_value(std::string_view key, const GgufValue& value,
                                      std::int64_t min, std::int64_t max,
                                      std::string_view expected) const {
  std::int64_t result = 0;
  if (!value.to_int64(result) || result < min || result > max) fail_value(key, value, expected);
  return result;
}

double GgufReader::floating_value(std::string_view key, const GgufValue& value) const {
  if (value.is_floating()) return value.as_double();
  std::int64_t integer = 0;
  if (value.to_int64(integer)) return static_cast<double>(integer);
  std::uint64_t large = 0;
  if (value.to_uint64(large)) return static_cast<double>(large);
  fail_value(key, value, kFloat);
}

std::uint32_t GgufReader::get_u32(std::string_view key) const {
  return static_cast<std::uint32_t>(
      unsigned_value(key, get(key), std::numeric_limits<std::uint32_t>::max(), kU32));
}

std::uint64_t GgufReader::get_u64(std::string_view key) const {
  return unsigned_value(key, get(key), std::numeric_limits<std::uint64_t>::max(), kU64);
}

std::int32_t GgufReader::get_i32(std::string_view key) const {
  return static_cast<std::int32_t>(signed_value(key, get(key),
                                                std::numeric_limits<std::int32_t>::min(),
                                                std::numeric_limits<std::int32_t>::max(), kI32));
}

std::int64_t GgufReader::get_i64(std::string_view key) const {
  return signed_value(key, get(key), std::numeric_limits<std::int64_t>::min(),
                      std::numeric_limits<std::int64_t>::max(), kI64);
}

float GgufReader::get_f32(std::string_view key) const {
  const GgufValue& value = get(key);
  const double result = floating_value(key, value);
  if (std::isfinite(result) && std::fabs(result) > std::numeric_limits<float>::max())
    fail_value(key, value, "a number in the float32 range");
  return static_cast<float>(result);
}

double GgufReader::get_f64(std::string_view key) const {
  return floating_value(key, get(key));
}

bool GgufReader::get_bool(std::string_view key) const {
  const GgufValue& value = get(key);
  if (value.type() != GgufValueType::Bool) fail_value(key, value, "a bool");
  return value.as_bool();
}

const std::string& GgufReader::get_string(std::string_view key) const {
  const GgufValue& value = get(key);
  if (value.type() != GgufValueType::String) fail_value(key, value, "a string");
  return value.text();
}

std::optional<std::uint32_t> GgufReader::find_u32(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_u32(key);
}

std::optional<float> GgufReader::find_f32(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_f32(key);
}

std::optional<bool> GgufReader::find_bool(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_bool(key);
}

std::optional<std::string> GgufReader::find_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_string(key);
}

const GgufValue& GgufReader::array(std::string_view key, std::string_view expected) const {
  const GgufValue& value = get(key);
  if (value.type() != GgufValueType::Array) fail_value(key, value, expected);
  return value;
}

std::size_t GgufReader::get_array_size(std::string_view key) const {
  return array(key, "an array").elements().size();
}

std::vector<std::string> GgufReader::get_string_array(std::string_view key) const {
  const GgufValue& value = array(key, "an array of string");
  if (value.element_type() != GgufValueType::String) fail_value(key, value, "an array of string");
  std::vector<std::string> result;
  result.reserve(value.elements().size());
  for (const GgufValue& element : value.elements()) result.push_back(element.text());
  return result;
}

std::vector<float> GgufReader::get_f32_array(std::string_view key) const {
  const GgufValue& value = array(key, "an array of float32");
  if (value.element_type() != GgufValueType::Float32) fail_value(key, value, "an array of float32");
  std::vector<float> result;
  result.reserve(value.elements().size());
  for (const GgufValue& element : value.elements())
    result.push_back(static_cast<float>(element.as_double()));
  return result;
}

std::vector<std::int32_t> GgufReader::get_i32_array(std::string_view key) const {
  constexpr std::string_view kExpected = "an array of integers that fit in int32";
  const GgufValue& value = array(key, kExpected);
  if (!is_integer(value.element_type())) fail_value(key, value, kExpected);
  std::vector<std::int32_t> result;
  result.reserve(value.elements().size());
  for (std::size_t i = 0; i < value.elements().size(); ++i) {
    std::int64_t element = 0;
    if (!value.elements()[i].to_int64(element) ||
        element < std::numeric_limits<std::int32_t>::min() ||
        element > std::numeric_limits<std::int32_t>::max())
      fail(path(), ": metadata '", key, "': element ", i, " is ", value.elements()[i].describe(),
           ", expected an integer that fits in int32");
    result.push_back(static_cast<std::int32_t>(element));
  }
  return result;
}

const GgufTensorInfo* GgufReader::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufReader::tensor(std::string_view name) const {
  const GgufTensorInfo* info = find_tensor(name);
  if (!info) fail(path(), ": tensor '", name, "' is missing");
  return *info;
}

std::span<const std::byte> GgufReader::tensor_data(const GgufTensorInfo& info) const {
  if (!is_supported(info.type))
    fail(path(), ": tensor '", info.name, "' has type ", ggml_type_name(info.type),
         ", which qforge cannot use (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and "
         "Q2_K..Q6_K)");
  return raw_tensor_data(info);
}

std::span<const std::byte> GgufReader::raw_tensor_data(const GgufTensorInfo& info) const {
  return file_.bytes().subspan(static_cast<std::size_t>(data_offset_ + info.offset),
                               static_cast<std::size_t>(info.byte_size));
}

}  // namespace qforge
