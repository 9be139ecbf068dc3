// The tokenizer against known ids, against a direct transcription of run.c's O(n^2) merge
// loop, across its two sources (tok512.bin and the GGUF's embedded vocabulary), and with
// damaged vocabulary files.
#include <gtest/gtest.h>

#include <cstdio>
#include <limits>
#include <map>

#include "model/format/gguf_reader.h"
#include "model/format/gguf_writer.h"
#include "model/tokenizer/tokenizer.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

using test::expect_error;
using Ids = std::vector<int>;

Tokenizer tok512() {
  return Tokenizer::from_llama2c_file(test::model_path("stories260K/tok512.bin"), 512);
}
Tokenizer tok105() {
  return Tokenizer::from_llama2c_file(test::model_path("babyllama-tok105/tok105.bin"), 105);
}
Tokenizer gguf_vocab() {
  const GgufReader gguf(test::model_path("stories260K/stories260K.gguf"));
  return Tokenizer::from_gguf(gguf);
}

// run.c's encode, transcribed: dummy prefix, one token per UTF-8 character (or its bytes as
// <0xNN> tokens; one <unk> when the vocabulary has no byte tokens), then merge the best-scoring
// adjacent pair, leftmost first, until nothing merges. Lookups go through its own table of piece
// strings.
Ids run_c_encode(const Tokenizer& t, std::string_view text, bool bos) {
  std::map<std::string, int> lookup;
  std::map<int, int> byte_token;
  for (int id = 0; id < t.vocab_size(); ++id) {
    const TokenType type = t.type(id);
    if (type == TokenType::Normal || type == TokenType::UserDefined)
      lookup.emplace(t.piece(id), id);
    unsigned byte = 0;
    char close = 0;
    if (type == TokenType::Byte &&
        std::sscanf(t.piece(id).c_str(), "<0x%02X%c", &byte, &close) == 2)
      byte_token[static_cast<int>(byte)] = id;
  }
  Ids tokens;
  if (bos) tokens.push_back(1);
  if (text.empty()) return tokens;
  const std::string input = " " + std::string(text);
  for (std::size_t i = 0; i < input.size();) {
    std::size_t n = 1;  // lead byte plus continuation bytes, at most 4
    while (i + n < input.size() && n < 4 &&
           (static_cast<unsigned char>(input[i + n]) & 0xc0) == 0x80)
      ++n;
    const std::string character = input.substr(i, n);
    if (const auto it = lookup.find(character); it != lookup.end()) {
      tokens.push_back(it->second);
    } else if (byte_token.size() == 256) {
      for (char c : character) tokens.push_back(byte_token.at(static_cast<unsigned char>(c)));
    } else {
      tokens.push_back(0);  // no byte fallback: one <unk> per character
    }
    i += n;
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1;
    std::size_t best_index = 0;
    for (std::size_t i = (bos ? 1 : 0); i + 1 < tokens.size(); ++i) {
      const auto it = lookup.find(t.piece(tokens[i]) + t.piece(tokens[i + 1]));
      if (it != lookup.end() && t.score(it->second) > best_score) {
        best_score = t.score(it->second);
        best_id = it->second;
        best_index = i;
      }
    }
    if (best_id < 0) break;
    tokens[best_index] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_index) + 1);
  }
  return tokens;
}

// run.c glues stray continuation bytes to the character before them; the tokenizer gives
// each byte of a malformed sequence its own symbol. The two agree on well-formed UTF-8.
bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t n = lead < 0x80                    ? 1
                    : lead >= 0xc2 && lead <= 0xdf ? 2
                    : lead >= 0xe0 && lead <= 0xef ? 3
                    : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                   : 0;
    if (n == 0 || i + n > text.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

std::string decode_all(const Tokenizer& t, const Ids& ids) {
  std::string text;
  for (std::size_t i = 1; i < ids.size(); ++i) text += t.decode(ids[i - 1], ids[i]);
  return text;
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts = {
      "Once upon a time",
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park.",
      "Tom said, \"Let's go!\" and they ran to the big tree. The end.",
      "The cat's name was Mittens; it was 3 years old (almost 4) & very happy :)",
      "Caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 \xe2\x80\x9cquotes\xe2\x80\x9d and "
      "\xe2\x80\x98single\xe2\x80\x99 \xe2\x80\xa6 done \xe2\x82\xac"
      "5",
      "emoji \xf0\x9f\x98\x80 and \xe4\xb8\xad\xe6\x96\x87 and tabs\tand\nnewlines\r\n",
      "   leading spaces",
      "trailing spaces   ",
      "a",
      " ",
      "!!!???...",
      "1234567890",
      "UPPER lower MiXeD Timmy Timmy Timmy",
      "broken utf-8: \xff\xfe \xc3 \x80\x80 \xe2\x82 end",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "the the the the the and and and said said said happy happy little little",
  };
  return texts;
}

TEST(Tokenizer, KnownIdsFromTok512) {
  const Tokenizer t = tok512();
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.encode("Once upon a time", true, false), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(t.encode("Once upon a time", true, true), (Ids{1, 403, 407, 261, 378, 2}));
  // U+1F600 is not a piece: byte fallback, byte b is id b + 3; " " (410) stays alone.
  EXPECT_EQ(t.encode("\xf0\x9f\x98\x80", false, false),
            (Ids{410, 0xf0 + 3, 0x9f + 3, 0x98 + 3, 0x80 + 3}));
  EXPECT_EQ(t.encode("", true, true), (Ids{1, 2}));
  EXPECT_EQ(t.encode("", false, false), Ids{});
  EXPECT_EQ(t.piece(259), " t");
  EXPECT_EQ(t.piece(317), " Lily");
  EXPECT_EQ(t.encode("Lily", false, false), Ids{317});
  EXPECT_TRUE(t.has_byte_tokens());
  EXPECT_EQ(t.find_piece("<0x41>"), -1);  // byte tokens never match text
  EXPECT_EQ(t.find_piece(" Once"), 403);
}

TEST(Tokenizer, GgufVocabularyEqualsTok512) {
  const Tokenizer bin = tok512();
  const Tokenizer gguf = gguf_vocab();
  ASSERT_EQ(gguf.vocab_size(), 512);
  EXPECT_EQ(gguf.bos_id(), 1);
  EXPECT_EQ(gguf.eos_id(), 2);
  EXPECT_EQ(gguf.piece(1), "<s>");
  EXPECT_EQ(bin.piece(1), "\n<s>\n");
  for (int id = 3; id < 512; ++id) {
    ASSERT_EQ(gguf.piece(id), bin.piece(id)) << id;  // U+2581 became ' '
    ASSERT_EQ(gguf.score(id), bin.score(id)) << id;
    ASSERT_EQ(gguf.type(id), bin.type(id)) << id;
  }
  for (const std::string& text : corpus()) {
    SCOPED_TRACE(text);
    const Ids ids = bin.encode(text, true, false);
    EXPECT_EQ(gguf.encode(text, true, false), ids);
    if (is_valid_utf8(text)) {
      EXPECT_EQ(ids, run_c_encode(bin, text, true));
    }
    EXPECT_EQ(decode_all(bin, ids), text);  // the dummy-prefix space is dropped after BOS
    EXPECT_EQ(decode_all(gguf, ids), decode_all(bin, ids));
  }
}

TEST(Tokenizer, Decode) {
  const Tokenizer t = tok512();
  EXPECT_EQ(t.decode(1, 403), "Once");  // the leading space goes after BOS only
  EXPECT_EQ(t.decode(378, 403), " Once");
  EXPECT_EQ(t.decode(378, 13), "\n");  // <0x0A>
  EXPECT_EQ(t.decode(378, 3 + 0xe2), "\xe2");
  EXPECT_EQ(t.decode(378, 1), "");  // control tokens print nothing
  EXPECT_EQ(t.decode(378, 2), "");
  expect_error([&] { t.decode(1, 512); }, {"tok512.bin", "512", "outside the vocabulary"});
  expect_error([&] { t.decode(1, -1); }, {"-1"});
}

TEST(Tokenizer, Tok105HasNoByteTokens) {
  const Tokenizer t = tok105();
  EXPECT_EQ(t.vocab_size(), 105);
  EXPECT_FALSE(t.has_byte_tokens());
  EXPECT_EQ(t.piece(3), " ");
  // Ids from the file: 3 ' ', 4 e, 7 o, 8 h, 14 l.
  EXPECT_EQ(t.encode("hello", true, false), (Ids{1, 3, 8, 4, 14, 14, 7}));
  // Characters outside the vocabulary become <unk>, one per character.
  EXPECT_EQ(t.encode("\xc3\xbc\n", false, false), (Ids{3, 0, 0}));
  const std::string text = "Once upon a time, there was a little girl named Lily.";
  const Ids ids = t.encode(text, true, false);
  EXPECT_EQ(ids, run_c_encode(t, text, true));
  EXPECT_EQ(decode_all(t, ids), text);
  for (const std::string& sample : corpus()) {
    if (is_valid_utf8(sample)) {
      EXPECT_EQ(t.encode(sample, true, false), run_c_encode(t, sample, true)) << sample;
    }
  }
}

TEST(Tokenizer, DamagedTok512) {
  const test::Bytes original = test::read_file_bytes(test::model_path("stories260K/tok512.bin"));
  ASSERT_EQ(original.size(), 6227u);
  test::ScratchDir dir;
  const std::string path = dir.file("tok.bin");
  for (std::size_t cut = 0; cut < original.size(); cut += (cut < 64 ? 1 : 97)) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    test::write_file_bytes(path, original.data(), cut);
    const std::string message =
        expect_error([&] { Tokenizer::from_llama2c_file(path, 512); }, {"tok.bin"});
    const bool names_field = message.find("token ") != std::string::npos ||
                             message.find("max_token_length") != std::string::npos;
    EXPECT_TRUE(names_field) << message;
  }
  test::Bytes negative = original;
  test::patch(negative, 4 + 4, std::int32_t{-5});  // token 0's length
  test::write_file_bytes(path, negative);
  expect_error([&] { Tokenizer::from_llama2c_file(path); }, {"tok.bin", "token 0", "length is -5"});
  test::Bytes huge = original;
  test::patch(huge, 4 + 4, std::int32_t{1 << 30});
  test::write_file_bytes(path, huge);
  expect_error([&] { Tokenizer::from_llama2c_file(path); }, {"tok.bin", "token 0", "past the end"});

  const std::string intact = test::model_path("stories260K/tok512.bin");
  expect_error([&] { Tokenizer::from_llama2c_file(intact, 500); },
               {"tok512.bin", "vocab_size 500"});
  expect_error([&] { Tokenizer::from_llama2c_file(intact, 600); },
               {"tok512.bin", "token 512", "truncated"});
  EXPECT_EQ(Tokenizer::from_llama2c_file(intact).vocab_size(), 512);
}

TEST(Tokenizer, DamagedGgufVocabulary) {
  struct Case {
    std::string name;
    std::function<void(GgufWriter&)> metadata;
    std::vector<std::string_view> parts;
  };
  const std::vector<std::string> tokens = {"<unk>", "<s>", "</s>",
                                           "\xe2\x96\x81"
                                           "a",
                                           "b"};
  const std::vector<Case> cases = {
      {"scores.gguf",
       [&](GgufWriter& w) {
         w.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
         w.add("tokenizer.ggml.scores", GgufValue::f32_array({0, 0, 0}));
       },
       {"'tokenizer.ggml.scores' has 3 entries", "has 5"}},
      {"types.gguf",
       [&](GgufWriter& w) {
         w.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
         w.add("tokenizer.ggml.token_type", GgufValue::i32_array({2, 3, 3, 1, 9}));
       },
       {"'tokenizer.ggml.token_type' [4] is 9"}},
      {"bos.gguf",
       [&](GgufWriter& w) {
         w.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
         w.add("tokenizer.ggml.bos_token_id", GgufValue::u32(600));
       },
       {"'tokenizer.ggml.bos_token_id' is 600"}},
      {"model.gguf",
       [&](GgufWriter& w) {
         w.add("tokenizer.ggml.model", GgufValue::string("bert"));
         w.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
       },
       {"'tokenizer.ggml.model'", "\"gpt2\""}},
      {"no_tokens.gguf", [&](GgufWriter&) {}, {"'tokenizer.ggml.tokens'", "missing"}},
      {"tokens_type.gguf",
       [&](GgufWriter& w) { w.add("tokenizer.ggml.tokens", GgufValue::f32_array({1.0f})); },
       {"'tokenizer.ggml.tokens'", "array of string"}},
      {"nan_score.gguf",
       [&](GgufWriter& w) {
         w.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
         w.add("tokenizer.ggml.scores",
               GgufValue::f32_array({0, 0, 0, std::numeric_limits<float>::quiet_NaN(), 0}));
       },
       {"'tokenizer.ggml.scores' [3]"}},
  };
  test::ScratchDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name);
    GgufWriter writer;
    c.metadata(writer);
    writer.write(path);
    const GgufReader gguf(path);
    const std::string message = expect_error([&] { Tokenizer::from_gguf(gguf); }, {c.name});
    for (std::string_view part : c.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\": " << message;
  }
  // Without scores and types the vocabulary still works: pieces match text, no merges rank.
  const std::string path = dir.file("minimal.gguf");
  GgufWriter writer;
  writer.add("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  writer.write(path);
  const Tokenizer t = Tokenizer::from_gguf(GgufReader(path));
  EXPECT_EQ(t.encode("ab", true, false), (Ids{1, 3, 4}));
}

}  // namespace
}  // namespace qforge
