// A read-only memory mapping of a whole file. The mapping lives as long as the object;
// moving the object keeps the mapped addresses valid.
//
// A file that another process truncates while it is mapped would end qforge with SIGBUS
// on the first read past its new end; a SIGBUS handler (installed with the first mapping,
// passing other faults on to the handler it replaced) names the file and exits with
// status 1 instead.
#pragma once

#include <cstddef>
#include <span>
#include <string>

namespace qforge {

class MappedFile {
 public:
  // Maps `path` read-only. Throws qforge::Error naming the path if it cannot be opened,
  // is not a regular file, cannot be mapped, or changes size while being opened. An empty
  // file maps to an empty span.
  explicit MappedFile(std::string path);
  ~MappedFile();

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }

 private:
  void release() noexcept;

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace qforge
