// The pieces under the byte-level tokenizer: UTF-8 stepping and classes, the byte-level
// alphabet, the pre-tokenizers on hand-checked cases, the merge loop, and the output
// stream. (tests/model/test_bpe_tokenizer.cpp checks whole tokenizers against npm ones.)
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pair_merger.h"
#include "model/tokenizer/pretokenizer.h"
#include "model/tokenizer/unicode_text.h"
#include "model/tokenizer/utf8_stream.h"

namespace qforge {
namespace {

TEST(UnicodeText, StepsOverWellFormedAndMalformedCharacters) {
  const std::string text = "a\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\xff\xe4\xb8";
  std::vector<Utf8Char> chars;
  for (std::size_t pos = 0; pos < text.size(); pos += chars.back().length)
    chars.push_back(next_char(text, pos));
  ASSERT_EQ(chars.size(), 7u);
  EXPECT_EQ(chars[0].code, U'a');
  EXPECT_EQ(chars[1].code, U'\u00e9');
  EXPECT_EQ(chars[2].code, U'\u4e2d');
  EXPECT_EQ(chars[3].code, U'\U0001F600');
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(chars[i].valid);
  for (int i = 4; i < 7; ++i) {  // 0xFF, then a truncated 3-byte sequence: a byte each
    EXPECT_FALSE(chars[i].valid);
    EXPECT_EQ(chars[i].length, 1u);
  }
  // Overlong forms and surrogates are malformed.
  EXPECT_FALSE(next_char("\xe0\x80\x80", 0).valid);
  EXPECT_FALSE(next_char("\xed\xa0\x80", 0).valid);
  EXPECT_FALSE(next_char("\xf4\x90\x80\x80", 0).valid);
  std::string back;
  for (char32_t c : {U'a', U'\u00e9', U'\u4e2d', U'\U0001F600'}) append_utf8(back, c);
  EXPECT_EQ(back, text.substr(0, 10));
}

TEST(UnicodeText, ClassesFollowTheUnicodeCategories) {
  for (char32_t c : {U'a', U'Z', U'\u00e9', U'\u4e2d', U'\u05d0', U'\u0416', U'\u3042'})
    EXPECT_TRUE(is_letter(c)) << std::hex << static_cast<unsigned>(c);
  for (char32_t c : {U'0', U'9', U'\u0663', U'\u00bd', U'\u2163', U'\uff11'})
    EXPECT_TRUE(is_number(c)) << std::hex << static_cast<unsigned>(c);
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', U'\u00a0', U'\u3000', U'\u2028', U'\ufeff'})
    EXPECT_TRUE(is_whitespace(c)) << std::hex << static_cast<unsigned>(c);
  for (char32_t c : {U'!', U'\'', U'_', U'\U0001F600', U'\u200b', U'\u0301'}) {
    EXPECT_FALSE(is_letter(c) || is_number(c) || is_whitespace(c))
        << std::hex << static_cast<unsigned>(c);
  }
}

TEST(ByteLevel, EveryByteRoundTripsThroughItsPrintableCodePoint) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const std::string text = to_byte_level(all);
  EXPECT_EQ(from_byte_level(text), all);
  EXPECT_EQ(to_byte_level(" hello\n"), "\xc4\xa0hello\xc4\x8a");  // "Ġhello" + "Ċ"
  EXPECT_EQ(to_byte_level("\xad"), "\xc5\x83");                   // the last shifted byte
  // Each byte is one code point of the alphabet, none of them white space.
  std::size_t chars = 0;
  for (std::size_t pos = 0; pos < text.size(); ++chars) {
    const Utf8Char c = next_char(text, pos);
    ASSERT_TRUE(c.valid);
    EXPECT_FALSE(is_whitespace(c.code));
    pos += c.length;
  }
  EXPECT_EQ(chars, 256u);
  EXPECT_EQ(from_byte_level("\xc5\x84"), std::nullopt);  // U+0144: outside the alphabet
  EXPECT_EQ(from_byte_level("\xff"), std::nullopt);
}

std::vector<std::string> words(PreTokenizer pre, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view w : split_words(pre, text)) out.emplace_back(w);
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, SplitsAsTheirPatternsDo) {
  EXPECT_EQ(words(PreTokenizer::Llama3, "Hello world's 12345!"),
            (Words{"Hello", " world", "'s", " ", "123", "45", "!"}));
  EXPECT_EQ(words(PreTokenizer::Qwen2, "x 2024"), (Words{"x", " ", "2", "0", "2", "4"}));
  EXPECT_EQ(words(PreTokenizer::Gpt2, "Hello world's 12345!"),
            (Words{"Hello", " world", "'s", " 12345", "!"}));
  // Case: (?i:) in Llama 3, case-sensitive in GPT-2.
  EXPECT_EQ(words(PreTokenizer::Llama3, "I'M"), (Words{"I", "'M"}));
  EXPECT_EQ(words(PreTokenizer::Gpt2, "I'M"), (Words{"I", "'", "M"}));
  // \s+(?!\S): a run of spaces leaves its last to the next word.
  EXPECT_EQ(words(PreTokenizer::Gpt2, "a   b  "), (Words{"a", "  ", " b", "  "}));
  EXPECT_EQ(words(PreTokenizer::Llama3, "a   b"), (Words{"a", "  ", " b"}));
  // \s*[\r\n]+ takes white space through its last line break.
  EXPECT_EQ(words(PreTokenizer::Llama3, "a \n\n  b"), (Words{"a", " \n\n", " ", " b"}));
  // [^\r\n\p{L}\p{N}]?\p{L}+ : one non-letter prefix, never a line break.
  EXPECT_EQ(words(PreTokenizer::Llama3, "\"quote\n\nx"), (Words{"\"quote", "\n\n", "x"}));
  //  ?[^\s\p{L}\p{N}]+[\r\n]* : punctuation keeps its line breaks.
  EXPECT_EQ(words(PreTokenizer::Llama3, "f(x);\n}"), (Words{"f", "(x", ");\n", "}"}));
  EXPECT_EQ(words(PreTokenizer::Gpt2, "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80"),
            (Words{"\xe4\xb8\xad\xe6\x96\x87", " \xf0\x9f\x98\x80"}));
  EXPECT_TRUE(words(PreTokenizer::Llama3, "").empty());
}

TEST(PreTokenizer, WordsCoverRandomBytesExactly) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             " ",
                                             "  ",
                                             "\n",
                                             "\r\n",
                                             "1",
                                             "'s",
                                             "'",
                                             "!",
                                             "\xc3\xa9",
                                             "\xe4\xb8\xad",
                                             "\xf0\x9f\x98\x80",
                                             "\xff",
                                             "\xe4",
                                             "\t",
                                             "\xc2\xa0"};
  for (int round = 0; round < 500; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    for (PreTokenizer pre : {PreTokenizer::Gpt2, PreTokenizer::Llama3, PreTokenizer::Qwen2}) {
      std::string joined;
      for (std::string_view w : split_words(pre, text)) {
        EXPECT_FALSE(w.empty());
        joined += w;
      }
      EXPECT_EQ(joined, text);
    }
  }
}

TEST(PreTokenizer, KnowsTheNamesGgufFilesUse) {
  EXPECT_EQ(pretokenizer_named("llama-bpe"), PreTokenizer::Llama3);
  EXPECT_EQ(pretokenizer_named("qwen2"), PreTokenizer::Qwen2);
  EXPECT_EQ(pretokenizer_named("gpt-2"), PreTokenizer::Gpt2);
  EXPECT_EQ(pretokenizer_named("default"), PreTokenizer::Gpt2);
  EXPECT_EQ(pretokenizer_named("deepseek-coder"), std::nullopt);
}

TEST(PairMerger, MergesTheBestPairFirstAndTheLeftmostOnTies) {
  // Priority: "ab" 3, "bc" 2, "abc" 5; "aa" 1.
  const MergePriority priority = [](std::string_view l,
                                    std::string_view r) -> std::optional<double> {
    const std::string joined = std::string(l) + std::string(r);
    if (joined == "ab") return 3;
    if (joined == "bc") return 2;
    if (joined == "abc") return 5;
    if (joined == "aa") return 1;
    return std::nullopt;
  };
  const auto run = [&](std::string_view text) {
    std::vector<std::size_t> ones(text.size(), 1);
    std::vector<std::string> out;
    for (std::string_view s : merge_pairs(text, ones, priority)) out.emplace_back(s);
    return out;
  };
  EXPECT_EQ(run("abc"), (Words{"abc"}));  // ab first, then ab+c
  EXPECT_EQ(run("bcab"), (Words{"bc", "ab"}));
  EXPECT_EQ(run("aaa"), (Words{"aa", "a"}));  // the leftmost of two equal pairs
  EXPECT_EQ(run("xa"), (Words{"x", "a"}));
  EXPECT_TRUE(run("").empty());
}

TEST(Utf8Stream, HoldsSplitCharactersAndReplacesBrokenOnes) {
  Utf8Stream s;
  EXPECT_EQ(s.push("a\xf0\x9f"), "a");
  EXPECT_EQ(s.push("\x98"), "");
  EXPECT_EQ(s.push("\x80!"), "\xf0\x9f\x98\x80!");
  EXPECT_EQ(s.push("\xff"), "\xef\xbf\xbd");                    // never starts a character
  EXPECT_EQ(s.push("\xe4\xb8x"), "\xef\xbf\xbd\xef\xbf\xbdx");  // interrupted
  EXPECT_EQ(s.push("\x01\x1b[2J\x7f\t\n"), "[2J\t\n");          // control bytes dropped
  EXPECT_EQ(s.push("\xc3"), "");
  EXPECT_EQ(s.finish(), "\xef\xbf\xbd");  // held at the end
  EXPECT_EQ(s.finish(), "");
}

}  // namespace
}  // namespace qforge
