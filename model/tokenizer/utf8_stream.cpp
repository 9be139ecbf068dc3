#include "model/tokenizer/utf8_stream.h"

#include "model/tokenizer/unicode_text.h"

namespace qforge {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool printable_ascii(unsigned char c) {
  return c >= 0x20 || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// True when text[pos..] is the start of a well-formed sequence that has not yet arrived
// in full: a lead byte followed only by continuation bytes, fewer than it needs.
bool incomplete_sequence(std::string_view text, std::size_t pos) {
  const std::size_t need = utf8_sequence_length(static_cast<unsigned char>(text[pos]));
  if (need < 2 || pos + need <= text.size()) return false;
  for (std::size_t i = pos + 1; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) return false;
  }
  return true;
}

}  // namespace

std::string Utf8Stream::push(std::string_view piece) {
  held_.append(piece);
  const std::string_view text = held_;
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) {
      if (printable_ascii(lead) && lead != 0x7f) out += static_cast<char>(lead);
      ++pos;
      continue;
    }
    if (incomplete_sequence(text, pos)) break;
    const Utf8Char c = next_char(text, pos);
    if (c.valid)
      out.append(text.substr(pos, c.length));
    else
      out.append(kReplacement);
    pos += c.length;
  }
  held_.erase(0, pos);
  return out;
}

std::string Utf8Stream::finish() {
  std::string out;
  for (std::size_t i = 0; i < held_.size(); ++i) out.append(kReplacement);
  held_.clear();
  return out;
}

}  // namespace qforge
