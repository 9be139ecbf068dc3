#include "model/tokenizer/pretokenizer.h"

#include <cstdint>

#include "model/tokenizer/unicode_text.h"

namespace qforge {

namespace {

// One character of the text with the classes the patterns test.
struct Char {
  std::size_t offset;
  char32_t code;  // 0xFFFFFFFF for a malformed byte
  bool letter;
  bool number;
  bool space;
};

std::vector<Char> classify(std::string_view text) {
  std::vector<Char> chars;
  chars.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    const Utf8Char c = next_char(text, pos);
    const char32_t code = c.valid ? c.code : 0xffffffffu;
    chars.push_back({pos, code, c.valid && is_letter(code), c.valid && is_number(code),
                     c.valid && is_whitespace(code)});
    pos += c.length;
  }
  return chars;
}

// Matches the alternatives at chars[i]; each returns the end index of its match or 0 (a
// match is never empty, so 0 means none at i > 0; i == 0 is handled by returning i + n).
class Matcher {
 public:
  explicit Matcher(const std::vector<Char>& chars) : c_(chars), n_(chars.size()) {}

  bool letter(std::size_t i) const { return i < n_ && c_[i].letter; }
  bool number(std::size_t i) const { return i < n_ && c_[i].number; }
  bool space(std::size_t i) const { return i < n_ && c_[i].space; }
  bool other(std::size_t i) const {
    return i < n_ && !c_[i].letter && !c_[i].number && !c_[i].space;
  }
  bool is(std::size_t i, char32_t code) const { return i < n_ && c_[i].code == code; }
  bool newline(std::size_t i) const { return is(i, '\r') || is(i, '\n'); }
  bool is_ascii_ci(std::size_t i, char lower) const {
    return is(i, static_cast<char32_t>(lower)) || is(i, static_cast<char32_t>(lower - 'a' + 'A'));
  }

  // 's|'t|'re|'ve|'m|'ll|'d, case-sensitive or not.
  std::size_t contraction(std::size_t i, bool ignore_case) const {
    if (!is(i, '\'')) return 0;
    const auto at = [&](std::size_t k, char lower) {
      return ignore_case ? is_ascii_ci(k, lower) : is(k, static_cast<char32_t>(lower));
    };
    if (at(i + 1, 's') || at(i + 1, 't') || at(i + 1, 'm') || at(i + 1, 'd')) return i + 2;
    if ((at(i + 1, 'r') || at(i + 1, 'v')) && at(i + 2, 'e')) return i + 3;
    if (at(i + 1, 'l') && at(i + 2, 'l')) return i + 3;
    return 0;
  }

  // ` ?X+` for a class X.
  template <typename Class>
  std::size_t optional_space_then_run(std::size_t i, Class in_class) const {
    std::size_t j = i;
    if (is(j, ' ') && in_class(j + 1)) ++j;
    if (!in_class(j)) return 0;
    while (in_class(j)) ++j;
    return j;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  std::size_t word_with_prefix(std::size_t i) const {
    std::size_t j = i;
    if (!letter(j) && !number(j) && !newline(j) && j < n_ && letter(j + 1)) ++j;
    if (!letter(j)) return 0;
    while (letter(j)) ++j;
    return j;
  }

  // \p{N}{1,max}
  std::size_t digits(std::size_t i, std::size_t max) const {
    std::size_t j = i;
    while (j - i < max && number(j)) ++j;
    return j > i ? j : 0;
  }

  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  std::size_t punctuation_then_newlines(std::size_t i) const {
    std::size_t j = optional_space_then_run(i, [&](std::size_t k) { return other(k); });
    if (j == 0) return 0;
    while (newline(j)) ++j;
    return j;
  }

  std::size_t space_run_end(std::size_t i) const {
    std::size_t k = i;
    while (space(k)) ++k;
    return k;
  }

  // \s*[\r\n]+ : the white space up to and including its last line break.
  std::size_t spaces_through_last_newline(std::size_t i) const {
    const std::size_t end = space_run_end(i);
    for (std::size_t k = end; k > i; --k) {
      if (newline(k - 1)) return k;
    }
    return 0;
  }

  // \s+(?!\S)|\s+ : all of a run that ends the text; else the run less its last character
  // (which then starts the next word), or the run itself when that would leave nothing.
  std::size_t trailing_spaces(std::size_t i) const {
    const std::size_t end = space_run_end(i);
    if (end == i) return 0;
    if (end == n_ || end - i == 1) return end;
    return end - 1;
  }

  std::size_t size() const { return n_; }

 private:
  const std::vector<Char>& c_;
  std::size_t n_;
};

std::size_t match_gpt2(const Matcher& m, std::size_t i) {
  if (std::size_t e = m.contraction(i, false)) return e;
  if (std::size_t e = m.optional_space_then_run(i, [&](std::size_t k) { return m.letter(k); }))
    return e;
  if (std::size_t e = m.optional_space_then_run(i, [&](std::size_t k) { return m.number(k); }))
    return e;
  if (std::size_t e = m.optional_space_then_run(i, [&](std::size_t k) { return m.other(k); }))
    return e;
  return m.trailing_spaces(i);
}

std::size_t match_llama3(const Matcher& m, std::size_t i, std::size_t max_digits) {
  if (std::size_t e = m.contraction(i, true)) return e;
  if (std::size_t e = m.word_with_prefix(i)) return e;
  if (std::size_t e = m.digits(i, max_digits)) return e;
  if (std::size_t e = m.punctuation_then_newlines(i)) return e;
  if (std::size_t e = m.spaces_through_last_newline(i)) return e;
  return m.trailing_spaces(i);
}

}  // namespace

std::optional<PreTokenizer> pretokenizer_named(std::string_view name) {
  if (name == "gpt-2" || name == "gpt2" || name == "default") return PreTokenizer::Gpt2;
  if (name == "llama-bpe" || name == "llama3") return PreTokenizer::Llama3;
  if (name == "qwen2") return PreTokenizer::Qwen2;
  return std::nullopt;
}

std::string_view known_pretokenizers() {
  return "gpt-2, default, llama-bpe, llama3, qwen2";
}

std::vector<std::string_view> split_words(PreTokenizer pre, std::string_view text) {
  const std::vector<Char> chars = classify(text);
  const Matcher m(chars);
  std::vector<std::string_view> words;
  for (std::size_t i = 0; i < m.size();) {
    std::size_t end = 0;
    switch (pre) {
      case PreTokenizer::Gpt2:
        end = match_gpt2(m, i);
        break;
      case PreTokenizer::Llama3:
        end = match_llama3(m, i, 3);
        break;
      case PreTokenizer::Qwen2:
        end = match_llama3(m, i, 1);
        break;
    }
    if (end <= i) end = i + 1;  // every character matches some alternative; never stall
    const std::size_t from = chars[i].offset;
    const std::size_t to = end < m.size() ? chars[end].offset : text.size();
    words.push_back(text.substr(from, to - from));
    i = end;
  }
  return words;
}

}  // namespace qforge
