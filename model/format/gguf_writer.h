// Writes GGUF v3 files (layout drawn in gguf_reader.h): metadata of every value type and
// tensors with their data aligned. The file appears atomically: it is written to
// "<path>.tmp" and renamed, so a failure leaves no partial output behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "model/format/gguf_types.h"

namespace qforge {

class GgufWriter {
 public:
  // An alignment other than 32 is recorded as metadata 'general.alignment' (uint32).
  explicit GgufWriter(std::uint32_t alignment = kGgufDefaultAlignment);

  // Keys must be unique; 'general.alignment' is set through the constructor only.
  void add(std::string key, GgufValue value);

  // `dims` are in ggml order (dims[0] contiguous). `data` must hold exactly the bytes of
  // that shape in that type (any known ggml type); it is copied.
  void add_tensor(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                  std::span<const std::byte> data);
  // Encodes float values (row-major, dims[0] fastest) to F32, F16, BF16, Q8_0, Q4_0 or Q4_1.
  void add_tensor_from_f32(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                           std::span<const float> values);

  // Produces the values of rows [first, first + count) (count x dims[0] floats, row-major)
  // on demand. Called from several threads at once, each with its own rows; it must
  // produce the same values whatever the split.
  using RowSource = std::function<void(std::uint64_t first, std::uint64_t count, float* out)>;
  // A tensor whose values are produced and encoded while the file is written, a chunk of
  // rows at a time: files larger than memory (synthetic 7B models) stream through.
  void add_tensor_streamed(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                           RowSource source);

  // Produces rows [first, first + count) already encoded in the tensor's type (count x
  // row bytes); called like a RowSource, from several threads for disjoint rows.
  using EncodedRowSource =
      std::function<void(std::uint64_t first, std::uint64_t count, std::byte* out)>;
  // A tensor whose bytes an encoder of the caller's produces while the file is written
  // (qforge's own quantization written as ggml blocks).
  void add_tensor_encoded(std::string name, GgmlType type, std::vector<std::uint64_t> dims,
                          EncodedRowSource source);
  // Called after each tensor's data is written (tensors written, tensors in all).
  void set_progress(std::function<void(std::size_t done, std::size_t total)> progress) {
    progress_ = std::move(progress);
  }

  // Writes the file; throws qforge::Error naming the path on any failure.
  void write(const std::string& path) const;

  std::uint32_t alignment() const { return alignment_; }

 private:
  struct PendingTensor {
    GgufTensorInfo info;
    std::vector<std::byte> data;  // empty for a streamed tensor
    RowSource source;
    EncodedRowSource encoded;
  };

  void add_pending(PendingTensor tensor);  // assigns its offset (make_info did) and keeps it
  void write_streamed(std::ostream& out, const PendingTensor& tensor) const;

  void check_new_tensor(const std::string& name, GgmlType type,
                        const std::vector<std::uint64_t>& dims) const;
  GgufTensorInfo make_info(std::string name, GgmlType type,
                           const std::vector<std::uint64_t>& dims) const;

  std::uint32_t alignment_;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, std::size_t, std::less<>> metadata_index_;
  std::vector<PendingTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> tensor_index_;
  std::uint64_t next_offset_ = 0;
  std::function<void(std::size_t, std::size_t)> progress_;
};

}  // namespace qforge
