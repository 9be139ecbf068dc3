#include <bit>
#include <cstdint>
#include <limits>
#include <sstream>
#include <utility>

#include "jit/base/error.h"
#include "model/format/gguf_types.h"

namespace qforge {

namespace {

bool is_signed_integer(GgufValueType type) {
  return type == GgufValueType::Int8 || type == GgufValueType::Int16 ||
         type == GgufValueType::Int32 || type == GgufValueType::Int64;
}

}  // namespace

GgufValue GgufValue::scalar(GgufValueType type, std::uint64_t bits) {
  GgufValue value;
  value.type_ = type;
  value.bits_ = bits;
  return value;
}

// Signed integers are stored sign-extended to 64 bits, so to_int64 needs no per-type code.
GgufValue GgufValue::u8(std::uint8_t value) {
  return scalar(GgufValueType::UInt8, value);
}
GgufValue GgufValue::u16(std::uint16_t value) {
  return scalar(GgufValueType::UInt16, value);
}
GgufValue GgufValue::u32(std::uint32_t value) {
  return scalar(GgufValueType::UInt32, value);
}
GgufValue GgufValue::u64(std::uint64_t value) {
  return scalar(GgufValueType::UInt64, value);
}
GgufValue GgufValue::i8(std::int8_t value) {
  return scalar(GgufValueType::Int8, static_cast<std::uint64_t>(std::int64_t{value}));
}
GgufValue GgufValue::i16(std::int16_t value) {
  return scalar(GgufValueType::Int16, static_cast<std::uint64_t>(std::int64_t{value}));
}
GgufValue GgufValue::i32(std::int32_t value) {
  return scalar(GgufValueType::Int32, static_cast<std::uint64_t>(std::int64_t{value}));
}
GgufValue GgufValue::i64(std::int64_t value) {
  return scalar(GgufValueType::Int64, static_cast<std::uint64_t>(value));
}
GgufValue GgufValue::f32(float value) {
  return scalar(GgufValueType::Float32, std::bit_cast<std::uint64_t>(static_cast<double>(value)));
}
GgufValue GgufValue::f64(double value) {
  return scalar(GgufValueType::Float64, std::bit_cast<std::uint64_t>(value));
}
GgufValue GgufValue::boolean(bool value) {
  return scalar(GgufValueType::Bool, value ? 1 : 0);
}

GgufValue GgufValue::string(std::string value) {
  GgufValue result = scalar(GgufValueType::String, 0);
  result.text_ = std::move(value);
  return result;
}

GgufValue GgufValue::array(GgufValueType element_type, std::vector<GgufValue> elements) {
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (elements[i].type() != element_type)
      fail("GGUF array of ", gguf_value_type_name(element_type), ": element ", i, " is ",
           gguf_value_type_name(elements[i].type()));
  }
  GgufValue result = scalar(GgufValueType::Array, 0);
  result.element_type_ = element_type;
  result.elements_ = std::move(elements);
  return result;
}

GgufValue GgufValue::string_array(const std::vector<std::string>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (const std::string& value : values) elements.push_back(string(value));
  return array(GgufValueType::String, std::move(elements));
}

GgufValue GgufValue::f32_array(const std::vector<float>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (float value : values) elements.push_back(f32(value));
  return array(GgufValueType::Float32, std::move(elements));
}

GgufValue GgufValue::i32_array(const std::vector<std::int32_t>& values) {
  std::vector<GgufValue> elements;
  elements.reserve(values.size());
  for (std::int32_t value : values) elements.push_back(i32(value));
  return array(GgufValueType::Int32, std::move(elements));
}

bool GgufValue::to_int64(std::int64_t& out) const {
  if (!is_integer()) return false;
  if (is_signed_integer(type_)) {
    out = static_cast<std::int64_t>(bits_);
    return true;
  }
  if (bits_ > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
  out = static_cast<std::int64_t>(bits_);
  return true;
}

bool GgufValue::to_uint64(std::uint64_t& out) const {
  if (!is_integer()) return false;
  if (is_signed_integer(type_) && static_cast<std::int64_t>(bits_) < 0) return false;
  out = bits_;
  return true;
}

double GgufValue::as_double() const {
  if (!is_floating()) fail("GGUF value ", describe(), " is not a float");
  return std::bit_cast<double>(bits_);
}

bool GgufValue::as_bool() const {
  if (type_ != GgufValueType::Bool) fail("GGUF value ", describe(), " is not a bool");
  return bits_ != 0;
}

std::string GgufValue::describe() const {
  std::ostringstream out;
  if (type_ == GgufValueType::Array) {
    out << "array[" << elements_.size() << "] of " << gguf_value_type_name(element_type_);
    return out.str();
  }
  if (type_ == GgufValueType::String) {
    out << '"' << text_.substr(0, 64) << (text_.size() > 64 ? "...\"" : "\"");
  } else if (type_ == GgufValueType::Bool) {
    out << (bits_ ? "true" : "false");
  } else if (is_floating()) {
    out << std::bit_cast<double>(bits_);
  } else if (is_signed_integer(type_)) {
    out << static_cast<std::int64_t>(bits_);
  } else {
    out << bits_;
  }
  out << " (" << gguf_value_type_name(type_) << ')';
  return out.str();
}

}  // namespace qforge
