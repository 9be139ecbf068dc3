#include "model/tokenizer/unicode_text.h"

#include <algorithm>
#include <iterator>

namespace qforge {

namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;
};

#include "model/tokenizer/unicode_classes.inc"

template <std::size_t N>
bool in_ranges(const CodePointRange (&ranges)[N], char32_t code) {
  const auto* it =
      std::upper_bound(std::begin(ranges), std::end(ranges), code,
                       [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(ranges) && code <= std::prev(it)->last;
}

}  // namespace

std::size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead <= 0xdf) return 2;
  if (lead >= 0xe0 && lead <= 0xef) return 3;
  if (lead >= 0xf0 && lead <= 0xf4) return 4;
  return 0;
}

Utf8Char next_char(std::string_view text, std::size_t pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
  const std::size_t length = utf8_sequence_length(byte(0));
  if (length == 0 || pos + length > text.size()) return {byte(0), 1, false};
  if (length == 1) return {byte(0), 1, true};
  char32_t code = byte(0) & (0x7f >> length);
  for (std::size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xc0) != 0x80) return {byte(0), 1, false};
    code = (code << 6) | (byte(i) & 0x3f);
  }
  // Overlong 3- and 4-byte forms, surrogates and code points past U+10FFFF.
  const bool overlong = (length == 3 && code < 0x800) || (length == 4 && code < 0x10000);
  if (overlong || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return {byte(0), 1, false};
  return {code, length, true};
}

void append_utf8(std::string& out, char32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

bool is_letter(char32_t code) {
  return in_ranges(kLetterRanges, code);
}
bool is_number(char32_t code) {
  return in_ranges(kNumberRanges, code);
}
bool is_whitespace(char32_t code) {
  return in_ranges(kWhitespaceRanges, code);
}

}  // namespace qforge
