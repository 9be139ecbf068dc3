// GGUF vocabulary: metadata value types, ggml tensor types with their block sizes, a
// metadata value and a tensor description. The file layout itself is drawn in
// gguf_reader.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qforge {

inline constexpr std::uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::uint32_t kGgufMaxDims = 4;

// Metadata value type ids, as stored in the file.
enum class GgufValueType : std::uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

bool is_known_gguf_value_type(std::uint32_t id);
std::string_view gguf_value_type_name(GgufValueType type);
// Bytes of one stored scalar; 0 for String and Array, whose size depends on the content.
std::size_t gguf_scalar_size(GgufValueType type);
bool is_integer(GgufValueType type);
bool is_floating(GgufValueType type);

// ggml tensor type ids, as stored in the file (ids 4, 5, 31..33 and 36..38 are retired).
enum class GgmlType : std::uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// Storage of one ggml type: `block_values` consecutive values along dimension 0 are
// stored in `block_bytes` bytes. `supported` types can be read as values by qforge
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1); the others can be listed but not used.
struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;
  std::uint32_t block_values;
  std::uint32_t block_bytes;
  bool supported;
};

// Returns nullptr for an id that is not a ggml type.
const GgmlTypeTraits* find_ggml_type(std::uint32_t id);
const GgmlTypeTraits& ggml_type_traits(GgmlType type);
std::string_view ggml_type_name(GgmlType type);
bool is_supported(GgmlType type);
// Bytes of `values` consecutive values (a row); `values` must be a multiple of the block.
std::uint64_t ggml_row_bytes(GgmlType type, std::uint64_t values);

// One metadata value: a scalar of any GGUF type, a string, or an array of values that all
// have the same type (arrays may nest). The stored type is kept exactly, so a value read
// from a file is written back unchanged.
class GgufValue {
 public:
  GgufValue() = default;

  static GgufValue u8(std::uint8_t value);
  static GgufValue i8(std::int8_t value);
  static GgufValue u16(std::uint16_t value);
  static GgufValue i16(std::int16_t value);
  static GgufValue u32(std::uint32_t value);
  static GgufValue i32(std::int32_t value);
  static GgufValue u64(std::uint64_t value);
  static GgufValue i64(std::int64_t value);
  static GgufValue f32(float value);
  static GgufValue f64(double value);
  static GgufValue boolean(bool value);
  static GgufValue string(std::string value);
  // Every element must have `element_type` (throws qforge::Error otherwise).
  static GgufValue array(GgufValueType element_type, std::vector<GgufValue> elements);
  static GgufValue string_array(const std::vector<std::string>& values);
  static GgufValue f32_array(const std::vector<float>& values);
  static GgufValue i32_array(const std::vector<std::int32_t>& values);

  GgufValueType type() const { return type_; }
  bool is_integer() const { return qforge::is_integer(type_); }
  bool is_floating() const { return qforge::is_floating(type_); }

  // Integer content as a signed / unsigned 64-bit number; false if the value is not an
  // integer or does not fit.
  bool to_int64(std::int64_t& out) const;
  bool to_uint64(std::uint64_t& out) const;
  // Float32 or Float64 content (Float32 widened exactly).
  double as_double() const;
  bool as_bool() const;
  const std::string& text() const { return text_; }
  GgufValueType element_type() const { return element_type_; }
  const std::vector<GgufValue>& elements() const { return elements_; }

  // A short rendering for messages: `7 (uint32)`, `"llama" (string)`, `array[512] of string`.
  std::string describe() const;

  bool operator==(const GgufValue& other) const = default;

 private:
  static GgufValue scalar(GgufValueType type, std::uint64_t bits);

  GgufValueType type_ = GgufValueType::UInt8;
  std::uint64_t bits_ = 0;  // integers (signed ones sign-extended), bool, or the f64 bits
  std::string text_;
  GgufValueType element_type_ = GgufValueType::UInt8;
  std::vector<GgufValue> elements_;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

// One tensor of the file. dims are in ggml order: dims[0] is the contiguous dimension
// (the columns, the "in" features of a weight), dims[1] the rows ("out"), and so on.
struct GgufTensorInfo {
  std::string name;
  std::uint32_t n_dims = 0;
  std::array<std::uint64_t, kGgufMaxDims> dims{1, 1, 1, 1};
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;     // from the start of the tensor data section
  std::uint64_t byte_size = 0;  // bytes of data, from dims and type

  std::uint64_t columns() const { return dims[0]; }
  std::uint64_t rows() const { return dims[1] * dims[2] * dims[3]; }
  std::uint64_t element_count() const { return columns() * rows(); }
  std::string shape_string() const;  // "[64, 512]" in ggml order
};

}  // namespace qforge
