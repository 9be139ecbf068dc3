// Reads GGUF v2 and v3 files through a read-only mapping, checking every count, length,
// dimension and offset against the file before using it.
//
// GGUF layout (little-endian throughout):
//
//   offset 0    char[4] magic "GGUF"
//          4    u32     version            (2 or 3; v1 had 32-bit counts)
//          8    u64     tensor_count
//          16   u64     metadata_kv_count
//          24   metadata_kv_count x { string key; u32 value_type; value }
//               tensor_count      x { string name; u32 n_dims; u64 dims[n_dims];
//                                     u32 ggml_type; u64 offset }
//               zero padding up to a multiple of general.alignment (default 32)
//   data_offset tensor data; tensor i starts at data_offset + offset_i,
//               and offset_i is a multiple of the alignment
//
//   string = u64 length, then length bytes of UTF-8 (no terminator)
//   value  = scalar of the type's size | string | array { u32 type; u64 count; values }
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "jit/base/error.h"
#include "model/format/gguf_types.h"
#include "model/format/mapped_file.h"

namespace qforge {

class GgufReader {
 public:
  // Maps and parses `path`; throws qforge::Error naming the file and the field at fault.
  explicit GgufReader(std::string path);

  const std::string& path() const { return file_.path(); }
  std::size_t file_size() const { return file_.size(); }
  const std::byte* file_data() const { return file_.data(); }
  std::uint32_t version() const { return version_; }
  std::uint32_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }

  // ---- metadata, in file order ----
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue& get(std::string_view key) const;  // throws if missing

  // Typed access. Integer getters accept any integer type whose value fits; float getters
  // accept float32, float64 and integers. Errors name the file, the key, the stored type
  // and the value.
  std::uint32_t get_u32(std::string_view key) const;
  std::uint64_t get_u64(std::string_view key) const;
  std::int32_t get_i32(std::string_view key) const;
  std::int64_t get_i64(std::string_view key) const;
  float get_f32(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  // nullopt when the key is absent; an error when present with an unusable type or value.
  std::optional<std::uint32_t> find_u32(std::string_view key) const;
  std::optional<float> find_f32(std::string_view key) const;
  std::optional<bool> find_bool(std::string_view key) const;
  std::optional<std::string> find_string(std::string_view key) const;

  // Arrays whose elements all have the named type (integer arrays accept any integer
  // element type whose values fit).
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<float> get_f32_array(std::string_view key) const;
  std::vector<std::int32_t> get_i32_array(std::string_view key) const;
  std::size_t get_array_size(std::string_view key) const;

  // ---- tensors, in file order ----
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const GgufTensorInfo& tensor(std::string_view name) const;  // throws if missing
  // The tensor's bytes inside the mapping. Throws if qforge cannot use the tensor's type.
  std::span<const std::byte> tensor_data(const GgufTensorInfo& info) const;
  // The bytes of a tensor of any type (qforge's encoding stores I8 parts).
  std::span<const std::byte> raw_tensor_data(const GgufTensorInfo& info) const;

 private:
  friend class GgufParser;

  [[noreturn]] void fail_value(std::string_view key, const GgufValue& value,
                               std::string_view expected) const;
  std::uint64_t unsigned_value(std::string_view key, const GgufValue& value, std::uint64_t max,
                               std::string_view expected) const;
  std::int64_t signed_value(std::string_view key, const GgufValue& value, std::int64_t min,
                            std::int64_t max, std::string_view expected) const;
  double floating_value(std::string_view key, const GgufValue& value) const;
  const GgufValue& array(std::string_view key, std::string_view expected) const;

  MappedFile file_;
  std::uint32_t version_ = 0;
  std::uint32_t alignment_ = kGgufDefaultAlignment;
  std::uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, std::size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
};

}  // namespace qforge
