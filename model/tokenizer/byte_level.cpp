#include "model/tokenizer/byte_level.h"

#include <array>

#include "model/tokenizer/unicode_text.h"

namespace qforge {

namespace {

constexpr bool maps_to_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) ||
         (byte >= 0xae && byte <= 0xff);
}

// kCodeOfByte[b]: the code point byte b stands as.
constexpr std::array<char32_t, 256> kCodeOfByte = [] {
  std::array<char32_t, 256> codes{};
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) codes[b] = maps_to_itself(b) ? char32_t(b) : next++;
  return codes;
}();

// The byte a code point of the alphabet stands for, or -1 (the alphabet is U+0021..U+0143).
int byte_of_code(char32_t code) {
  if (code < 0x100) return maps_to_itself(static_cast<int>(code)) ? static_cast<int>(code) : -1;
  static const std::array<int, 68> bytes_of_shifted = [] {
    std::array<int, 68> bytes{};
    for (int b = 0; b < 256; ++b) {
      if (!maps_to_itself(b)) bytes[kCodeOfByte[b] - 0x100] = b;
    }
    return bytes;
  }();
  return code - 0x100 < bytes_of_shifted.size() ? bytes_of_shifted[code - 0x100] : -1;
}

}  // namespace

std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, kCodeOfByte[static_cast<unsigned char>(c)]);
  return out;
}

std::optional<std::string> from_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = next_char(text, pos);
    const int byte = c.valid ? byte_of_code(c.code) : -1;
    if (byte < 0) return std::nullopt;
    out += static_cast<char>(byte);
    pos += c.length;
  }
  return out;
}

}  // namespace qforge
