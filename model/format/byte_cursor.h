// A bounds-checked little-endian reader over a byte span. Every read names what it reads,
// so a short file produces "<file>: <context>: truncated: <what> needs N bytes at ...".
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "jit/base/error.h"

namespace qforge {

static_assert(std::endian::native == std::endian::little,
              "model files are little-endian and are read without byte swapping");

class ByteCursor {
 public:
  ByteCursor(std::span<const std::byte> bytes, std::string_view file_name)
      : bytes_(bytes), file_name_(file_name) {}

  std::size_t position() const { return position_; }
  std::size_t size() const { return bytes_.size(); }
  std::size_t remaining() const { return bytes_.size() - position_; }

  // Describes the structure being read, e.g. "metadata entry 3 ('general.name')".
  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }

  template <typename T>
  T read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::span<const std::byte> read_bytes(std::size_t count, std::string_view what) {
    require(count, what);
    std::span<const std::byte> out = bytes_.subspan(position_, count);
    position_ += count;
    return out;
  }

  std::string_view read_text(std::size_t count, std::string_view what) {
    std::span<const std::byte> raw = read_bytes(count, what);
    return {reinterpret_cast<const char*>(raw.data()), raw.size()};
  }

  void require(std::size_t count, std::string_view what) const {
    if (count > remaining()) truncated(count, what);
  }

  [[noreturn]] void truncated(std::size_t count, std::string_view what) const {
    fail_here("truncated: ", what, " needs ", count, " bytes at offset ", position_,
              ", but the file ends at ", bytes_.size());
  }

  // Throws "<file>: <context>: <parts...>".
  template <typename... Parts>
  [[noreturn]] void fail_here(Parts&&... parts) const {
    fail(file_name_, ": ", context_, context_.empty() ? "" : ": ", std::forward<Parts>(parts)...);
  }

 private:
  std::span<const std::byte> bytes_;
  std::string file_name_;
  std::string context_;
  std::size_t position_ = 0;
};

}  // namespace qforge
