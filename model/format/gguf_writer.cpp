#include "model/format/gguf_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <utility>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "model/format/ggml_quants.h"

namespace qforge {

namespace {

constexpr std::uint32_t kGgufVersion = 3;

// Appends little-endian encodings to a byte buffer (the header is built in memory, the
// tensor data is streamed after it).
class ByteSink {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* raw = reinterpret_cast<const std::byte*>(&value);
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
  }
  void put_string(std::string_view text) {
    put<std::uint64_t>(text.size());
    const auto* raw = reinterpret_cast<const std::byte*>(text.data());
    bytes_.insert(bytes_.end(), raw, raw + text.size());
  }
  void pad_to(std::uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(std::byte{0});
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

void put_value(ByteSink& sink, const GgufValue& value) {
  std::int64_t signed_value = 0;
  std::uint64_t unsigned_value = 0;
  value.to_int64(signed_value);
  value.to_uint64(unsigned_value);
  switch (value.type()) {
    case GgufValueType::UInt8:
      return sink.put(static_cast<std::uint8_t>(unsigned_value));
    case GgufValueType::Int8:
      return sink.put(static_cast<std::int8_t>(signed_value));
    case GgufValueType::UInt16:
      return sink.put(static_cast<std::uint16_t>(unsigned_value));
    case GgufValueType::Int16:
      return sink.put(static_cast<std::int16_t>(signed_value));
    case GgufValueType::UInt32:
      return sink.put(static_cast<std::uint32_t>(unsigned_value));
    case GgufValueType::Int32:
      return sink.put(static_cast<std::int32_t>(signed_value));
    case GgufValueType::UInt64:
      return sink.put(unsigned_value);
    case GgufValueType::Int64:
      return sink.put(signed_value);
    case GgufValueType::Float32:
      return sink.put(static_cast<float>(value.as_double()));
    case GgufValueType::Float64:
      return sink.put(value.as_double());
    case GgufValueType::Bool:
      return sink.put(static_cast<std::uint8_t>(value.as_bool()));
    case GgufValueType::String:
      return sink.put_string(value.text());
    case GgufValueType::Array:
      sink.put(static_cast<std::uint32_t>(value.element_type()));
      sink.put<std::uint64_t>(value.elements().size());
      for (const GgufValue& element : value.elements()) put_value(sink, element);
      return;
  }
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

GgufWriter::GgufWriter(std::uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail("GGUF writer: alignment ", alignment, " is not a power of two");
  if (alignment != kGgufDefaultAlignment) {
    metadata_index_.emplace("general.alignment", 0);
    metadata_.push_back({"general.alignment", GgufValue::u32(alignment)});
  }
}

void GgufWriter::add(std::string key, GgufValue value) {
  if (key == "general.alignment")
    fail("GGUF writer: set 'general.alignment' through the GgufWriter constructor");
  if (!metadata_index_.emplace(key, metadata_.size()).second)
    fail("GGUF writer: metadata key '", key, "' added twice");
  metadata_.push_back({std::move(key), std::move(value)});
}

void GgufWriter::check_new_tensor(const std::string& name, GgmlType type,
                                  const std::vector<std::uint64_t>& dims) const {
  if (tensor_index_.count(name)) fail("GGUF writer: tensor '", name, "' added twice");
  if (!find_ggml_type(static_cast<std::uint32_t>(type)))
    fail("GGUF writer: tensor '", name, "': unknown ggml type id ",
         static_cast<std::uint32_t>(type));
  if (dims.empty() || dims.size() > kGgufMaxDims)
    fail("GGUF writer: tensor '", name, "' has ", dims.size(), " dims; 1 to ", kGgufMaxDims,
         " are supported");
  std::uint64_t elements = 1;
  for (std::uint64_t dim : dims) {
    if (__builtin_mul_overflow(elements, dim, &elements) ||
        elements > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail("GGUF writer: tensor '", name, "': element count overflows");
  }
}

GgufTensorInfo GgufWriter::make_info(std::string name, GgmlType type,
                                     const std::vector<std::uint64_t>& dims) const {
  check_new_tensor(name, type, dims);
  GgufTensorInfo info;
  info.name = std::move(name);
  info.type = type;
  info.n_dims = static_cast<std::uint32_t>(dims.size());
  for (std::size_t d = 0; d < dims.size(); ++d) info.dims[d] = dims[d];
  const GgmlTypeTraits& traits = ggml_type_traits(type);
  if (info.dims[0] % traits.block_values != 0)
    fail("GGUF writer: tensor '", info.name, "': dims[0] = ", info.dims[0],
         " is not a multiple of the ", traits.name, " block size ", traits.block_values);
  info.byte_size = ggml_row_bytes(type, info.dims[0]) * info.rows();
  info.offset = next_offset_;
  return info;
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                            std::span<const std::byte> data) {
  GgufTensorInfo info = make_info(std::move(name), type, dims);
  if (data.size() != info.byte_size)
    fail("GGUF writer: tensor '", info.name, "' ", info.shape_string(), " ", ggml_type_name(type),
         " needs ", info.byte_size, " bytes, got ", data.size());
  add_pending({std::move(info), std::vector<std::byte>(data.begin(), data.end()), {}, {}});
}

void GgufWriter::add_tensor_from_f32(std::string name, GgmlType type,
                                     std::vector<std::uint64_t> dims,
                                     std::span<const float> values) {
  GgufTensorInfo info = make_info(std::move(name), type, dims);
  if (values.size() != info.element_count())
    fail("GGUF writer: tensor '", info.name, "' ", info.shape_string(), " has ",
         info.element_count(), " values, got ", values.size());
  std::vector<std::byte> data(static_cast<std::size_t>(info.byte_size));
  const auto columns = static_cast<std::size_t>(info.columns());
  const auto row_bytes = static_cast<std::size_t>(ggml_row_bytes(type, columns));
  for (std::size_t row = 0; row < info.rows(); ++row)
    quantize_row(type, values.subspan(row * columns, columns),
                 std::span<std::byte>(data).subspan(row * row_bytes, row_bytes));
  add_pending({std::move(info), std::move(data), {}, {}});
}

void GgufWriter::add_tensor_streamed(std::string name, GgmlType type,
                                     std::vector<std::uint64_t> dims, RowSource source) {
  if (!source) fail("GGUF writer: tensor '", name, "' has no row source");
  add_pending({make_info(std::move(name), type, dims), {}, std::move(source), {}});
}

void GgufWriter::add_tensor_encoded(std::string name, GgmlType type,
                                    std::vector<std::uint64_t> dims, EncodedRowSource source) {
  if (!source) fail("GGUF writer: tensor '", name, "' has no row source");
  add_pending({make_info(std::move(name), type, dims), {}, {}, std::move(source)});
}

void GgufWriter::add_pending(PendingTensor tensor) {
  next_offset_ = align_up(tensor.info.offset + tensor.info.byte_size, alignment_);
  tensor_index_.emplace(tensor.info.name, tensors_.size());
  tensors_.push_back(std::move(tensor));
}

// Rows are produced and encoded in chunks of about 64 MiB of floats, split over the
// cores, and appended in order.
void GgufWriter::write_streamed(std::ostream& out, const PendingTensor& tensor) const {
  const GgufTensorInfo& info = tensor.info;
  const std::uint64_t columns = info.columns();
  const std::uint64_t rows = info.rows();
  const auto row_bytes = static_cast<std::size_t>(ggml_row_bytes(info.type, columns));
  const std::uint64_t chunk_rows = std::max<std::uint64_t>(1, (std::uint64_t{16} << 20) / columns);
  std::vector<float> values;
  std::vector<std::byte> encoded;
  for (std::uint64_t first = 0; first < rows; first += chunk_rows) {
    const std::uint64_t count = std::min(chunk_rows, rows - first);
    if (!tensor.encoded) values.resize(static_cast<std::size_t>(count * columns));
    encoded.resize(static_cast<std::size_t>(count) * row_bytes);
    const int threads = default_load_threads();
    parallel_for(
        static_cast<std::int64_t>(count), threads, [&](std::int64_t begin, std::int64_t end) {
          if (tensor.encoded) {
            tensor.encoded(first + begin, end - begin, encoded.data() + begin * row_bytes);
            return;
          }
          float* rows_out = values.data() + begin * columns;
          tensor.source(first + begin, end - begin, rows_out);
          for (std::int64_t r = begin; r < end; ++r)
            quantize_row(info.type, std::span<const float>(values.data() + r * columns, columns),
                         std::span<std::byte>(encoded).subspan(r * row_bytes, row_bytes));
        });
    out.write(reinterpret_cast<const char*>(encoded.data()),
              static_cast<std::streamsize>(encoded.size()));
  }
}

void GgufWriter::write(const std::string& path) const {
  ByteSink header;
  header.put<char>('G');
  header.put<char>('G');
  header.put<char>('U');
  header.put<char>('F');
  header.put<std::uint32_t>(kGgufVersion);
  header.put<std::uint64_t>(tensors_.size());
  header.put<std::uint64_t>(metadata_.size());
  for (const GgufKeyValue& entry : metadata_) {
    header.put_string(entry.key);
    header.put(static_cast<std::uint32_t>(entry.value.type()));
    put_value(header, entry.value);
  }
  for (const PendingTensor& tensor : tensors_) {
    header.put_string(tensor.info.name);
    header.put<std::uint32_t>(tensor.info.n_dims);
    for (std::uint32_t d = 0; d < tensor.info.n_dims; ++d) header.put(tensor.info.dims[d]);
    header.put(static_cast<std::uint32_t>(tensor.info.type));
    header.put(tensor.info.offset);
  }
  header.pad_to(alignment_);

  const std::string temporary = path + ".tmp";
  try {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, ": cannot create ", temporary, ": ", std::strerror(errno));
    // Tensor offsets were assigned in add order, each aligned: offset_i = sum of the
    // aligned sizes before it, so writing data + padding in order lands on every offset.
    const auto write_bytes = [&](const std::byte* data, std::size_t size) {
      out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    };
    write_bytes(header.bytes().data(), header.bytes().size());
    // Every tensor, the last one included, is followed by zeros up to the alignment.
    const std::vector<std::byte> zeros(alignment_);
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const PendingTensor& tensor = tensors_[i];
      if (tensor.source || tensor.encoded)
        write_streamed(out, tensor);
      else
        write_bytes(tensor.data.data(), tensor.data.size());
      const std::uint64_t size = tensor.info.byte_size;
      const std::uint64_t padding = align_up(size, alignment_) - size;
      write_bytes(zeros.data(), static_cast<std::size_t>(padding));
      if (progress_) progress_(i + 1, tensors_.size());
    }
    out.close();
    if (!out) fail(path, ": writing ", temporary, " failed: ", std::strerror(errno));
  } catch (...) {
    // A write that failed, or a tensor that could not be converted: no partial file stays.
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary);
    fail(path, ": cannot rename ", temporary, " to it: ", error.message());
  }
}

}  // namespace qforge
