// Joins decoded pieces into printable text: a byte-level or byte-token piece may end in
// the middle of a UTF-8 character, whose remaining bytes come with the next token.
//
//   push("\xF0\x9F")  -> ""          (held: the start of a 4-byte character)
//   push("\x98\x80!") -> "😀!"
//   push("\xFF")      -> "\uFFFD"    (a byte no character starts with)
//   finish()          -> U+FFFD for each byte still held
//
// C0 control bytes other than tab, line feed, vertical tab, form feed and carriage return,
// and DEL, are dropped, so a model cannot write terminal escape sequences.
#pragma once

#include <string>
#include <string_view>

namespace qforge {

class Utf8Stream {
 public:
  std::string push(std::string_view piece);
  std::string finish();

 private:
  std::string held_;
};

}  // namespace qforge
