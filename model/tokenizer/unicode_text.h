// UTF-8 stepping and the three character classes the pre-tokenizers' patterns use.
//
//   text bytes ──next_char──▶ {code point, byte length, valid}
//   code point ──is_letter / is_number / is_whitespace──▶ \p{L}, \p{N}, \s
//
// A byte that does not start a well-formed UTF-8 sequence is one character of length 1
// with valid = false; it belongs to none of the classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qforge {

struct Utf8Char {
  char32_t code = 0;
  std::size_t length = 1;
  bool valid = false;
};

// The character starting at text[pos] (pos < text.size()).
Utf8Char next_char(std::string_view text, std::size_t pos);
// Bytes of a complete, well-formed UTF-8 sequence starting with `lead`: 1-4, or 0 when
// `lead` cannot start one.
std::size_t utf8_sequence_length(unsigned char lead);
void append_utf8(std::string& out, char32_t code);

bool is_letter(char32_t code);      // \p{L}
bool is_number(char32_t code);      // \p{N}
bool is_whitespace(char32_t code);  // \s (Unicode White_Space and U+FEFF)

}  // namespace qforge
