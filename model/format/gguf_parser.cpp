// Parsing of the GGUF header, metadata and tensor infos (layout drawn in gguf_reader.h).
// Every count is bounded by the bytes that could hold it before anything is allocated.
#include <cstring>
#include <limits>
#include <string>

#include "model/format/byte_cursor.h"
#include "model/format/gguf_reader.h"

namespace qforge {

namespace {

// Smallest encodings, used to reject counts that cannot fit in the file.
constexpr std::uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;       // key length, type, u8
constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, 1 dim
constexpr std::uint64_t kMinArrayBytes = 4 + 8;                   // element type, count
constexpr std::uint64_t kStringLengthBytes = 8;
constexpr int kMaxArrayNesting = 8;
constexpr std::uint64_t kMaxElementCount = std::numeric_limits<std::int64_t>::max();

constexpr std::string_view kDimFieldNames[kGgufMaxDims] = {"dims[0]", "dims[1]", "dims[2]",
                                                           "dims[3]"};

std::string printable(std::span<const std::byte> bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (std::byte b : bytes) {
    const auto c = static_cast<unsigned char>(b);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + "\"";
}

std::uint64_t min_value_bytes(GgufValueType type) {
  if (type == GgufValueType::String) return kStringLengthBytes;
  if (type == GgufValueType::Array) return kMinArrayBytes;
  return gguf_scalar_size(type);
}

}  // namespace

class GgufParser {
 public:
  explicit GgufParser(GgufReader& reader)
      : reader_(reader), cursor_(reader.file_.bytes(), reader.file_.path()) {}

  void parse() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_tensor_data();
  }

 private:
  void read_header() {
    cursor_.set_context("header");
    const std::span<const std::byte> magic = cursor_.read_bytes(4, "magic");
    if (std::memcmp(magic.data(), "GGUF", 4) != 0)
      cursor_.fail_here("not a GGUF file: magic is ", printable(magic), ", expected \"GGUF\"");

    const auto version = cursor_.read<std::uint32_t>("version");
    if (version == 1)
      cursor_.fail_here(
          "version is 1; GGUF v1 (32-bit counts) is not supported, only v2 and "
          "v3: convert the model again with a current llama.cpp");
    if (version == 0x02000000u || version == 0x03000000u)
      cursor_.fail_here("version reads as ", version,
                        ": this is a big-endian GGUF file; only little-endian is supported");
    if (version != 2 && version != 3)
      cursor_.fail_here("version is ", version, "; only GGUF v2 and v3 are supported");
    reader_.version_ = version;

    tensor_count_ = cursor_.read<std::uint64_t>("tensor_count");
    metadata_count_ = cursor_.read<std::uint64_t>("metadata_kv_count");
    // Counts are bounded by the whole file, so a file cut short reports the entry it ends in.
    check_against_file(metadata_count_, kMinMetadataEntryBytes, "metadata_kv_count",
                       "metadata entry");
    check_against_file(tensor_count_, kMinTensorInfoBytes, "tensor_count", "tensor info");
  }

  void check_against_file(std::uint64_t count, std::uint64_t min_item_bytes, std::string_view field,
                          std::string_view item) const {
    if (count > cursor_.size() / min_item_bytes)
      cursor_.fail_here(field, " is ", count, ", but a file of ", cursor_.size(),
                        " bytes holds at most ", cursor_.size() / min_item_bytes, " (each ", item,
                        " takes at least ", min_item_bytes,
                        " bytes): the count is corrupt or the file is truncated");
  }

  // A count is absurd when even the smallest encoding of that many items overruns the file.
  void check_count(std::uint64_t count, std::uint64_t min_item_bytes, std::string_view field,
                   std::string_view item) const {
    if (count > cursor_.remaining() / min_item_bytes)
      cursor_.fail_here(field, " is ", count, ", but only ", cursor_.remaining(),
                        " bytes follow offset ", cursor_.position(), " and each ", item,
                        " takes at least ", min_item_bytes,
                        ": the count is corrupt or the file is truncated");
  }

  std::string read_string(std::string_view what) {
    const auto length = cursor_.read<std::uint64_t>(what);
    if (length > cursor_.remaining())
      cursor_.fail_here(what, ": length ", length, " runs past the end of the file (",
                        cursor_.remaining(), " bytes left at offset ", cursor_.position(), ")");
    return std::string(cursor_.read_text(static_cast<std::size_t>(length), what));
  }

  GgufValueType read_value_type(std::string_view what) {
    const auto id = cursor_.read<std::uint32_t>(what);
    if (!is_known_gguf_value_type(id))
      cursor_.fail_here(what, " is ", id, ", which is not a GGUF value type (0..12)");
    return static_cast<GgufValueType>(id);
  }

  void read_metadata() {
    reader_.metadata_.reserve(static_cast<std::size_t>(metadata_count_));
    for (std::uint64_t i = 0; i < metadata_count_; ++i) {
      cursor_.set_context("metadata entry " + std::to_string(i));
      std::string key = read_string("key");
      cursor_.set_context("metadata '" + key + "'");
      const GgufValueType type = read_value_type("value type");
      GgufValue value = read_value(type, 0);
      const auto [it, inserted] = reader_.metadata_index_.emplace(key, reader_.metadata_.size());
      if (!inserted)
        cursor_.fail_here("key appears twice (metadata entries ", it->second, " and ", i, ")");
      reader_.metadata_.push_back({std::move(key), std::move(value)});
    }
  }

  GgufValue read_value(GgufValueType type, int depth) {
    switch (type) {
      case GgufValueType::UInt8:
        return GgufValue::u8(cursor_.read<std::uint8_t>("uint8 value"));
      case GgufValueType::Int8:
        return GgufValue::i8(cursor_.read<std::int8_t>("int8 value"));
      case GgufValueType::UInt16:
        return GgufValue::u16(cursor_.read<std::uint16_t>("uint16 value"));
      case GgufValueType::Int16:
        return GgufValue::i16(cursor_.read<std::int16_t>("int16 value"));
      case GgufValueType::UInt32:
        return GgufValue::u32(cursor_.read<std::uint32_t>("uint32 value"));
      case GgufValueType::Int32:
        return GgufValue::i32(cursor_.read<std::int32_t>("int32 value"));
      case GgufValueType::UInt64:
        return GgufValue::u64(cursor_.read<std::uint64_t>("uint64 value"));
      case GgufValueType::Int64:
        return GgufValue::i64(cursor_.read<std::int64_t>("int64 value"));
      case GgufValueType::Float32:
        return GgufValue::f32(cursor_.read<float>("float32 value"));
      case GgufValueType::Float64:
        return GgufValue::f64(cursor_.read<double>("float64 value"));
      case GgufValueType::Bool: {
        const auto byte = cursor_.read<std::uint8_t>("bool value");
        if (byte > 1) cursor_.fail_here("bool value is ", int{byte}, ", expected 0 or 1");
        return GgufValue::boolean(byte == 1);
      }
      case GgufValueType::String:
        return GgufValue::string(read_string("string value"));
      case GgufValueType::Array:
        return read_array(depth);
    }
    cursor_.fail_here("value type ", static_cast<std::uint32_t>(type), " is not a GGUF type");
  }

  GgufValue read_array(int depth) {
    if (depth >= kMaxArrayNesting)
      cursor_.fail_here("arrays are nested more than ", kMaxArrayNesting, " deep");
    const GgufValueType element_type = read_value_type("array element type");
    const auto count = cursor_.read<std::uint64_t>("array length");
    check_count(count, min_value_bytes(element_type), "array length",
                std::string(gguf_value_type_name(element_type)) + " element");
    std::vector<GgufValue> elements;
    elements.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i)
      elements.push_back(read_value(element_type, depth + 1));
    return GgufValue::array(element_type, std::move(elements));
  }

  void read_alignment() {
    cursor_.set_context("");
    const GgufValue* value = reader_.find("general.alignment");
    if (!value) return;
    // The spec types it uint32, and a writer writes it back as one: any other integer type
    // would not survive a round trip (llama.cpp rejects it too).
    std::uint64_t alignment = 0;
    if (value->type() != GgufValueType::UInt32 || !value->to_uint64(alignment) || alignment == 0 ||
        alignment > std::numeric_limits<std::uint32_t>::max() || (alignment & (alignment - 1)) != 0)
      cursor_.fail_here("metadata 'general.alignment' is ", value->describe(),
                        ", expected a uint32 power of two");
    reader_.alignment_ = static_cast<std::uint32_t>(alignment);
  }

  void read_tensor_infos() {
    reader_.tensors_.reserve(static_cast<std::size_t>(tensor_count_));
    for (std::uint64_t i = 0; i < tensor_count_; ++i) {
      cursor_.set_context("tensor info " + std::to_string(i));
      GgufTensorInfo info;
      info.name = read_string("name");
      cursor_.set_context("tensor '" + info.name + "'");
      read_shape(info);
      read_type_and_offset(info);
      const auto [it, inserted] = reader_.tensor_index_.emplace(info.name, reader_.tensors_.size());
      if (!inserted)
        cursor_.fail_here("name appears twice (tensor infos ", it->second, " and ", i, ")");
      reader_.tensors_.push_back(std::move(info));
    }
  }

  void read_shape(GgufTensorInfo& info) {
    info.n_dims = cursor_.read<std::uint32_t>("n_dims");
    if (info.n_dims == 0 || info.n_dims > kGgufMaxDims)
      cursor_.fail_here("n_dims is ", info.n_dims, "; 1 to ", kGgufMaxDims, " are supported");
    for (std::uint32_t d = 0; d < info.n_dims; ++d)
      info.dims[d] = cursor_.read<std::uint64_t>(kDimFieldNames[d]);
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < info.n_dims; ++d) {
      if (__builtin_mul_overflow(elements, info.dims[d], &elements) || elements > kMaxElementCount)
        cursor_.fail_here("dims ", info.shape_string(), ": the element count overflows 2^63 - 1");
    }
  }

  void read_type_and_offset(GgufTensorInfo& info) {
    const auto type_id = cursor_.read<std::uint32_t>("ggml type");
    const GgmlTypeTraits* traits = find_ggml_type(type_id);
    if (!traits) cursor_.fail_here("ggml type id ", type_id, " is not a known ggml type");
    info.type = traits->type;
    info.offset = cursor_.read<std::uint64_t>("offset");

    if (info.dims[0] % traits->block_values != 0)
      cursor_.fail_here("dims[0] = ", info.dims[0], " is not a multiple of the ", traits->name,
                        " block size ", traits->block_values);
    const std::uint64_t blocks_per_row = info.dims[0] / traits->block_values;
    // blocks_per_row * rows <= element count < 2^63, so only the byte count can overflow.
    if (__builtin_mul_overflow(blocks_per_row * info.rows(), std::uint64_t{traits->block_bytes},
                               &info.byte_size))
      cursor_.fail_here("the data size of ", info.shape_string(), " ", traits->name,
                        " overflows 64 bits");
    if (info.offset % reader_.alignment_ != 0)
      cursor_.fail_here("offset ", info.offset, " is not a multiple of the alignment ",
                        reader_.alignment_);
  }

  void place_tensor_data() {
    cursor_.set_context("");
    const std::uint64_t alignment = reader_.alignment_;
    const std::uint64_t end_of_infos = cursor_.position();
    reader_.data_offset_ = (end_of_infos + alignment - 1) / alignment * alignment;
    const std::uint64_t file_size = cursor_.size();
    for (const GgufTensorInfo& info : reader_.tensors_) {
      const bool inside = info.offset <= file_size && reader_.data_offset_ <= file_size &&
                          info.offset <= file_size - reader_.data_offset_ &&
                          info.byte_size <= file_size - reader_.data_offset_ - info.offset;
      if (!inside)
        fail(reader_.path(), ": tensor '", info.name, "': offset ", info.offset, " + size ",
             info.byte_size, " is past the end of the file (size ", file_size,
             ", tensor data starts at ", reader_.data_offset_, ")");
    }
  }

  GgufReader& reader_;
  ByteCursor cursor_;
  std::uint64_t tensor_count_ = 0;
  std::uint64_t metadata_count_ = 0;
};

GgufReader::GgufReader(std::string path) : file_(std::move(path)) {
  GgufParser(*this).parse();
}

}  // namespace qforge
