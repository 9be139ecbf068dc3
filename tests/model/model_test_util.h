// Helpers for the model tests: a scratch directory, raw byte building and error checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

#include "jit/base/error.h"

namespace qforge::test {

using Bytes = std::vector<std::uint8_t>;

// A fresh directory under the system temp dir, removed with everything in it.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("qforge-model-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  std::string file(std::string_view name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline Bytes read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file_bytes(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline void write_file_bytes(const std::string& path, const Bytes& bytes) {
  write_file_bytes(path, bytes.data(), bytes.size());
}

// Little-endian field-by-field construction of files, independent of the code under test.
class ByteBuilder {
 public:
  template <typename T>
  ByteBuilder& put(T value) {
    std::uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    bytes_.insert(bytes_.end(), raw, raw + sizeof(T));
    return *this;
  }
  ByteBuilder& u8(std::uint8_t v) { return put(v); }
  ByteBuilder& u32(std::uint32_t v) { return put(v); }
  ByteBuilder& i32(std::int32_t v) { return put(v); }
  ByteBuilder& u64(std::uint64_t v) { return put(v); }
  ByteBuilder& f32(float v) { return put(v); }
  ByteBuilder& raw(std::string_view text) {
    bytes_.insert(bytes_.end(), text.begin(), text.end());
    return *this;
  }
  // GGUF string: u64 length + bytes.
  ByteBuilder& str(std::string_view text) { return u64(text.size()).raw(text); }
  ByteBuilder& zeros(std::size_t count) {
    bytes_.insert(bytes_.end(), count, 0);
    return *this;
  }
  ByteBuilder& pad_to(std::size_t alignment) {
    while (bytes_.size() % alignment) bytes_.push_back(0);
    return *this;
  }
  std::size_t size() const { return bytes_.size(); }
  const Bytes& bytes() const { return bytes_; }

 private:
  Bytes bytes_;
};

template <typename T>
void patch(Bytes& bytes, std::size_t offset, T value) {
  ASSERT_LE(offset + sizeof(T), bytes.size());
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

// Runs `action`, expects a qforge::Error, and checks that its message contains every part.
// Returns the message ("" when nothing or something else was thrown).
inline std::string expect_error(const std::function<void()>& action,
                                std::initializer_list<std::string_view> parts,
                                std::source_location where = std::source_location::current()) {
  std::string message;
  try {
    action();
    ADD_FAILURE_AT(where.file_name(), where.line()) << "expected a qforge::Error, none thrown";
    return message;
  } catch (const Error& error) {
    message = error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE_AT(where.file_name(), where.line())
        << "expected a qforge::Error, got another exception: " << error.what();
    return message;
  }
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos)
      ADD_FAILURE_AT(where.file_name(), where.line())
          << "error message lacks \"" << part << "\":\n  " << message;
  }
  return message;
}

inline std::string file_name_of(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace qforge::test
