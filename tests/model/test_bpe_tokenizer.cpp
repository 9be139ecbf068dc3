// Byte-level BPE tokenizers against independent npm implementations with their own
// vocabularies (tests/oracles/tokenizers/oracle.mjs): llama3-tokenizer-js (Llama 3,
// pre "llama-bpe"), js-tiktoken's GPT-2 ranks (pre "gpt-2") and its cl100k ranks under
// Qwen2's pattern (pre "qwen2"). Each vocabulary is written into a GGUF file as a
// converter would write it; qforge must give the same ids for every string of a corpus
// of hard cases and random text, and decode them back to the same bytes.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/format/gguf_reader.h"
#include "model/format/gguf_writer.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/utf8_stream.h"
#include "tests/model/model_test_util.h"
#include "tests/support/tokenizer_oracle.h"

namespace qforge {
namespace {

std::vector<std::string> hard_cases() {
  return {
      "",
      "Hello world!",
      "Hello, World! HELLO world... hello-world_hello.world",
      " leading space",
      "   three leading spaces",
      "trailing spaces   ",
      "\n",
      "\n\n\n",
      " \n \n  \n",
      "line one\nline two\r\nline three\r\rend",
      "tabs\tand\t\ttabs \t mixed",
      "don't can't won't I'm you're we've they'll she'd",
      "DON'T CAN'T I'M YOU'RE WE'VE THEY'LL SHE'D",
      "Don'T mIxEd'Ll cAsE'Re",
      "'s 't 're 've 'm 'll 'd ' '' '''",
      "1 12 123 1234 12345 123456 1234567 3.14159 1,000,000 0x1F 1e-9",
      "2024-12-02T15:04:05Z",
      "\xd9\xa1\xd9\xa2\xd9\xa3 \xe2\x85\xa0\xe2\x85\xa1 \xc2\xbd \xef\xbc\x91\xef\xbc\x92",  // Arabic-Indic
                                                                                              // digits,
                                                                                              // Roman
                                                                                              // numerals,
                                                                                              // ½,
                                                                                              // fullwidth
      "caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
      "e\xcc\x81 combining acute, a\xcc\x8a ring",
      "\xe4\xb8\xad\xe6\x96\x87\xe5\x88\x86\xe8\xaf\x8d\xe6\xb5\x8b\xe8\xaf\x95\xef\xbc\x8c\xe4\xbd"
      "\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c\xe3\x80\x82",
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x81\xb2\xe3\x82\x89\xe3\x81\x8c\xe3\x81"
      "\xaa\xe3\x81\xa8\xe3\x82\xab\xe3\x82\xbf\xe3\x82\xab\xe3\x83\x8a",
      "\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xed\x85\x8c\xec\x8a\xa4\xed\x8a\xb8",
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82, \xd0\xbc\xd0\xb8\xd1\x80!",
      "\xd7\xa9\xd7\x9c\xd7\x95\xd7\x9d \xd8\xa7\xd9\x84\xd8\xb3\xd9\x84\xd8\xa7\xd9\x85 "
      "\xd8\xb9\xd9\x84\xd9\x8a\xd9\x83\xd9\x85",
      "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 "
      "\xe0\xb8\xaa\xe0\xb8\xa7\xe0\xb8\xb1\xe0\xb8\xaa\xe0\xb8\x94\xe0\xb8\xb5",
      "\xf0\x9f\x98\x80\xf0\x9f\x98\x83\xf0\x9f\x98\x84 \xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd "
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
      "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7",
      "emoji\xf0\x9f\x94\xa5in\xf0\x9f\x94\xa5words",
      "\xc2\xa0non-breaking\xc2\xa0spaces\xe3\x80\x80ideographic\xe2\x80\x83"
      "em",
      "zero\xe2\x80\x8bwidth\xe2\x80\x8cjoiners\xef\xbb\xbf",
      "int main(int argc, char** argv) {\n    return argc > 1 ? 0 : -1;\n}\n",
      "def f(x):\n\tif x == 0:\n\t\treturn [1, 2, 3]  # comment\n\treturn {'a': x}\n",
      "for (auto& [k, v] : map) { std::cout << k << \"=\" << v << '\\n'; }",
      "<div class=\"x\">&amp;&lt;&gt;</div> https://example.com/path?q=1&r=2#frag",
      "!!!??? ... --- *** ___ ((( ))) [[[ ]]] {{{ }}} ;;; ::: ,,,",
      "$$$ %%% ^^^ &&& ||| ~~~ ``` @@@ ### \\\\\\ ///",
      "a\xe2\x80\x94"
      "b \xe2\x80\x9cquoted\xe2\x80\x9d \xe2\x80\x98single\xe2\x80\x99 \xe2\x80\xa6 "
      "\xc2\xab\xc2\xbb",
      "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "            \n            \n",
      "<|endoftext|>",
      "before<|endoftext|>after <|endoftext|> spaced",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
      "<|eot_id|><|eot_id|>x<|reserved_special_token_5|>",
      "<|not_a_special|> <| |> <|",
  };
}

// Random strings over an alphabet of the classes the patterns tell apart.
std::vector<std::string> random_cases(int count) {
  const std::vector<std::string> alphabet = {"a",
                                             "b",
                                             "Z",
                                             "the",
                                             " ",
                                             "  ",
                                             "\n",
                                             "\r\n",
                                             "\t",
                                             "0",
                                             "7",
                                             "42",
                                             "'",
                                             "'s",
                                             "'LL",
                                             "!",
                                             ".",
                                             ",",
                                             "(",
                                             ")",
                                             "-",
                                             "_",
                                             "\"",
                                             "\xc3\xa9",
                                             "\xe4\xb8\xad",
                                             "\xe6\x96\x87",
                                             "\xf0\x9f\x98\x80",
                                             "\xe2\x80\x8d",
                                             "\xc2\xa0",
                                             "\xd9\xa3",
                                             "\xd0\xb6",
                                             "\xe3\x81\x82",
                                             "\xcc\x81",
                                             "<|endoftext|>"};
  std::mt19937 rng(2024);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    out.push_back(std::move(text));
  }
  return out;
}

std::string ids_text(const std::vector<int>& ids) {
  std::ostringstream s;
  for (int id : ids) s << id << ' ';
  return s.str();
}

Tokenizer tokenizer_from(const test::OracleVocabulary& v, const std::string& path) {
  GgufWriter writer;
  writer.add("tokenizer.ggml.model", GgufValue::string("gpt2"));
  writer.add("tokenizer.ggml.pre", GgufValue::string(v.pre));
  writer.add("tokenizer.ggml.tokens", GgufValue::string_array(v.tokens));
  writer.add("tokenizer.ggml.token_type", GgufValue::i32_array(v.types));
  writer.add("tokenizer.ggml.merges", GgufValue::string_array(v.merges));
  writer.add("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<std::uint32_t>(v.bos)));
  writer.add("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<std::uint32_t>(v.eos)));
  if (v.eot >= 0)
    writer.add("tokenizer.ggml.eot_token_id", GgufValue::u32(static_cast<std::uint32_t>(v.eot)));
  writer.write(path);
  return Tokenizer::from_gguf(GgufReader(path));
}

class BpeTokenizer : public ::testing::TestWithParam<const char*> {};

TEST_P(BpeTokenizer, MatchesTheNpmTokenizerBothWays) {
  test::ScratchDir dir;
  std::vector<std::string> corpus = hard_cases();
  for (std::string& text : random_cases(400)) corpus.push_back(std::move(text));
  const test::OracleRun oracle = test::run_tokenizer_oracle(GetParam(), corpus, dir.path());
  ASSERT_EQ(oracle.results.size(), corpus.size());
  const Tokenizer tokenizer =
      tokenizer_from(oracle.vocabulary, dir.file(std::string(GetParam()) + ".gguf"));
  EXPECT_EQ(tokenizer.model(), TokenizerModel::ByteLevelBpe);
  EXPECT_EQ(tokenizer.vocab_size(), static_cast<int>(oracle.vocabulary.tokens.size()));

  int mismatches = 0;
  for (std::size_t i = 0; i < corpus.size(); ++i) {
    const std::vector<int>& expected = oracle.results[i].ids;
    const std::vector<int> ids = tokenizer.encode(corpus[i], false, false, /*parse_special=*/true);
    if (ids != expected && ++mismatches <= 5) {
      ADD_FAILURE() << GetParam() << " case " << i << " \"" << corpus[i]
                    << "\"\n  qforge: " << ids_text(ids) << "\n  npm:    " << ids_text(expected);
    }
    // Decoding the reference's ids gives back its text, joined through the output stream.
    std::string decoded;
    Utf8Stream stream;
    for (std::size_t k = 0; k < expected.size(); ++k)
      decoded += stream.push(tokenizer.decode(k > 0 ? expected[k - 1] : -1, expected[k]));
    decoded += stream.finish();
    EXPECT_EQ(decoded, oracle.results[i].decoded) << GetParam() << " case " << i;
  }
  EXPECT_EQ(mismatches, 0) << "of " << corpus.size() << " strings";

  // A prompt starts with BOS only where the vocabulary asks for it (Llama 3).
  const std::vector<int> prompt = tokenizer.encode_prompt("Hi");
  EXPECT_EQ(prompt.front() == oracle.vocabulary.bos, oracle.vocabulary.add_bos);
  if (oracle.vocabulary.eot >= 0) {
    EXPECT_TRUE(tokenizer.ends_generation(oracle.vocabulary.eot));
  }
  EXPECT_TRUE(tokenizer.ends_generation(oracle.vocabulary.eos));
  // Without parse_special, special tokens written in the text are text.
  const std::vector<int> plain = tokenizer.encode("<|endoftext|>", false, false);
  EXPECT_GT(plain.size(), 1u);
}

// A hand-made vocabulary: bytes "a", "b", "c", " " (as "Ġ"), and merges "a b", "Ġ a",
// "ab c" in that order.
struct SmallVocabulary {
  std::vector<std::string> tokens = {"a",
                                     "b",
                                     "c",
                                     "\xc4\xa0",
                                     "ab",
                                     "\xc4\xa0"
                                     "a",
                                     "abc",
                                     "<|end|>"};
  std::vector<std::int32_t> types = {1, 1, 1, 1, 1, 1, 1, 3};
  std::vector<std::string> merges = {"a b", "\xc4\xa0 a", "ab c"};
  std::string pre = "gpt-2";
};

void write_small(const SmallVocabulary& v, const std::string& path) {
  GgufWriter writer;
  writer.add("tokenizer.ggml.model", GgufValue::string("gpt2"));
  writer.add("tokenizer.ggml.pre", GgufValue::string(v.pre));
  writer.add("tokenizer.ggml.tokens", GgufValue::string_array(v.tokens));
  writer.add("tokenizer.ggml.token_type", GgufValue::i32_array(v.types));
  if (!v.merges.empty()) writer.add("tokenizer.ggml.merges", GgufValue::string_array(v.merges));
  writer.add("tokenizer.ggml.eos_token_id", GgufValue::u32(7));
  writer.add("tokenizer.ggml.bos_token_id", GgufValue::u32(7));
  writer.write(path);
}

TEST(BpeTokenizer, MergesByRankOnAHandMadeVocabulary) {
  test::ScratchDir dir;
  write_small(SmallVocabulary{}, dir.file("small.gguf"));
  const Tokenizer t = Tokenizer::from_gguf(GgufReader(dir.file("small.gguf")));
  // "abc a": words "abc", " a"; "ab" then "abc"; "Ġ a".
  EXPECT_EQ(t.encode("abc a", false, false), (std::vector<int>{6, 5}));
  EXPECT_EQ(t.encode("cab", false, false), (std::vector<int>{2, 4}));
  EXPECT_EQ(t.encode("x", false, false), (std::vector<int>{0}));  // no such byte: <unk> (id 0)
  EXPECT_EQ(t.encode("a<|end|>b", false, false, true), (std::vector<int>{0, 7, 1}));
  EXPECT_FALSE(t.adds_bos());  // gpt-2 files add no BOS unless they say so
  EXPECT_EQ(t.decode(-1, 5), " a");
  EXPECT_EQ(t.decode(-1, 7), "");  // control
}

TEST(BpeTokenizer, DamagedVocabulariesAreRefusedNamingTheField) {
  test::ScratchDir dir;
  struct Case {
    std::string name;
    std::function<void(SmallVocabulary&)> damage;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {"unknown_pre.gguf",
       [](SmallVocabulary& v) { v.pre = "deepseek-coder"; },
       {"'tokenizer.ggml.pre'", "deepseek-coder", "llama-bpe"}},
      {"no_merges.gguf",
       [](SmallVocabulary& v) { v.merges.clear(); },
       {"'tokenizer.ggml.merges'", "missing"}},
      {"unknown_part.gguf",
       [](SmallVocabulary& v) { v.merges.push_back("a zz"); },
       {"'tokenizer.ggml.merges' [3]", "\"zz\"", "not a token"}},
      {"unjoined.gguf",
       [](SmallVocabulary& v) { v.merges.push_back("b c"); },
       {"'tokenizer.ggml.merges' [3]", "\"b c\"", "joins into"}},
      {"no_space.gguf",
       [](SmallVocabulary& v) { v.merges.push_back("abc"); },
       {"'tokenizer.ggml.merges' [3]", "two tokens"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SmallVocabulary v;
    c.damage(v);
    write_small(v, dir.file(c.name));
    const GgufReader gguf(dir.file(c.name));
    const std::string message = test::expect_error([&] { Tokenizer::from_gguf(gguf); }, {c.name});
    for (const std::string& part : c.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\": " << message;
  }
}

INSTANTIATE_TEST_SUITE_P(Npm, BpeTokenizer, ::testing::Values("llama3", "gpt2", "qwen2"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace qforge
