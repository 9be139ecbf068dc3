// Tokenizer vocabularies from llama2.c tokenizer.bin files and from GGUF metadata.
#include <cmath>
#include <string>

#include "jit/base/error.h"
#include "model/format/byte_cursor.h"
#include "model/format/gguf_reader.h"
#include "model/format/mapped_file.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

namespace {

constexpr std::string_view kSentencePieceSpace = "\xe2\x96\x81";  // U+2581

std::string spaces_from_sentencepiece(std::string piece) {
  for (std::size_t at = piece.find(kSentencePieceSpace); at != std::string::npos;
       at = piece.find(kSentencePieceSpace, at + 1))
    piece.replace(at, kSentencePieceSpace.size(), " ");
  return piece;
}

std::string spaces_to_sentencepiece(std::string_view piece) {
  std::string out;
  for (const char c : piece) {
    if (c == ' ')
      out += kSentencePieceSpace;
    else
      out += c;
  }
  return out;
}

bool is_byte_piece(std::string_view piece) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return piece.size() == 6 && piece.substr(0, 3) == "<0x" && hex(piece[3]) && hex(piece[4]) &&
         piece[5] == '>';
}

}  // namespace

Tokenizer Tokenizer::from_llama2c_file(const std::string& path, int expected_vocab_size) {
  const MappedFile file(path);
  ByteCursor cursor(file.bytes(), path);
  cursor.set_context("tokenizer header");
  cursor.read<std::uint32_t>("max_token_length");

  TokenizerVocabulary vocabulary;
  const auto more = [&](int id) {
    return expected_vocab_size < 0 ? cursor.remaining() > 0 : id < expected_vocab_size;
  };
  for (int id = 0; more(id); ++id) {
    cursor.set_context("token " + std::to_string(id));
    const auto score = cursor.read<float>("score");
    const auto length = cursor.read<std::int32_t>("length");
    if (length < 0) cursor.fail_here("length is ", length, ", expected a byte count >= 0");
    if (static_cast<std::size_t>(length) > cursor.remaining())
      cursor.fail_here("length ", length, " runs past the end of the file (", cursor.remaining(),
                       " bytes left at offset ", cursor.position(), ")");
    std::string piece(cursor.read_text(static_cast<std::size_t>(length), "piece"));

    TokenType type = is_byte_piece(piece) ? TokenType::Byte : TokenType::Normal;
    if (id == 0) type = TokenType::Unknown;
    if (id == 1 || id == 2) type = TokenType::Control;
    vocabulary.pieces.push_back(std::move(piece));
    vocabulary.scores.push_back(score);
    vocabulary.types.push_back(type);
  }
  if (cursor.remaining() > 0)
    fail(path, ": ", cursor.remaining(), " bytes follow token ", expected_vocab_size - 1,
         ": the file holds more tokens than the model's vocab_size ", expected_vocab_size);
  if (vocabulary.pieces.size() < 3)
    fail(path, ": holds ", vocabulary.pieces.size(),
         " tokens; a llama2.c vocabulary starts with <unk>, BOS and EOS");
  return Tokenizer(std::move(vocabulary), path);
}

Tokenizer Tokenizer::from_gguf(const GgufReader& gguf) {
  const std::string& path = gguf.path();
  TokenizerVocabulary vocabulary;
  const std::string model = gguf.find_string("tokenizer.ggml.model").value_or("llama");
  if (model == "gpt2") {
    vocabulary.model = TokenizerModel::ByteLevelBpe;
  } else if (model != "llama") {
    fail(path, ": metadata 'tokenizer.ggml.model' is \"", model,
         "\"; qforge reads \"llama\" (SentencePiece) and \"gpt2\" (byte-level BPE)");
  }
  const bool bpe = vocabulary.model == TokenizerModel::ByteLevelBpe;

  vocabulary.pieces = gguf.get_string_array("tokenizer.ggml.tokens");
  const std::size_t n = vocabulary.pieces.size();
  if (!bpe) {
    for (std::string& piece : vocabulary.pieces)
      piece = spaces_from_sentencepiece(std::move(piece));
  }

  if (gguf.has("tokenizer.ggml.scores")) {
    vocabulary.scores = gguf.get_f32_array("tokenizer.ggml.scores");
    if (vocabulary.scores.size() != n)
      fail(path, ": metadata 'tokenizer.ggml.scores' has ", vocabulary.scores.size(),
           " entries, but 'tokenizer.ggml.tokens' has ", n);
    for (std::size_t id = 0; id < n; ++id) {
      if (!std::isfinite(vocabulary.scores[id]))
        fail(path, ": metadata 'tokenizer.ggml.scores' [", id, "] is ", vocabulary.scores[id]);
    }
  } else {
    vocabulary.scores.assign(n, 0.0f);
  }

  if (gguf.has("tokenizer.ggml.token_type")) {
    const std::vector<std::int32_t> types = gguf.get_i32_array("tokenizer.ggml.token_type");
    if (types.size() != n)
      fail(path, ": metadata 'tokenizer.ggml.token_type' has ", types.size(),
           " entries, but 'tokenizer.ggml.tokens' has ", n);
    for (std::size_t id = 0; id < n; ++id) {
      if (types[id] < 1 || types[id] > 6)
        fail(path, ": metadata 'tokenizer.ggml.token_type' [", id, "] is ", types[id],
             ", not a token type (1 to 6)");
      vocabulary.types.push_back(static_cast<TokenType>(types[id]));
    }
  } else {
    for (const std::string& piece : vocabulary.pieces)
      vocabulary.types.push_back(is_byte_piece(piece) ? TokenType::Byte : TokenType::Normal);
  }

  const auto special_id = [&](std::string_view key, int fallback) {
    const std::optional<std::uint32_t> id = gguf.find_u32(key);
    if (id && *id >= n)
      fail(path, ": metadata '", key, "' is ", *id, ", outside the vocabulary of ", n, " tokens");
    return id ? static_cast<int>(*id) : fallback;
  };
  vocabulary.bos_id = special_id("tokenizer.ggml.bos_token_id", 1);
  vocabulary.eos_id = special_id("tokenizer.ggml.eos_token_id", 2);
  vocabulary.unknown_id = special_id("tokenizer.ggml.unknown_token_id", 0);
  vocabulary.end_of_turn_id = special_id("tokenizer.ggml.eot_token_id", -1);
  vocabulary.add_space_prefix = gguf.find_bool("tokenizer.ggml.add_space_prefix").value_or(!bpe);

  if (bpe) {
    if (!gguf.has("tokenizer.ggml.merges"))
      fail(path, ": metadata 'tokenizer.ggml.merges' is missing; a \"gpt2\" tokenizer needs it");
    vocabulary.merges = gguf.get_string_array("tokenizer.ggml.merges");
    const std::string pre = gguf.find_string("tokenizer.ggml.pre").value_or("default");
    const std::optional<PreTokenizer> known = pretokenizer_named(pre);
    if (!known)
      fail(path, ": metadata 'tokenizer.ggml.pre' is \"", pre,
           "\", a pre-tokenizer qforge does not know (it knows ", known_pretokenizers(), ")");
    vocabulary.pre = *known;
    // As llama.cpp: Llama 3 files prepend BOS and look whole words up before merging.
    vocabulary.ignore_merges = *known == PreTokenizer::Llama3;
  }
  vocabulary.add_bos = gguf.find_bool("tokenizer.ggml.add_bos_token")
                           .value_or(!bpe || vocabulary.pre == PreTokenizer::Llama3);
  vocabulary.add_eos = gguf.find_bool("tokenizer.ggml.add_eos_token").value_or(false);
  return Tokenizer(std::move(vocabulary), path);
}

std::vector<GgufKeyValue> Tokenizer::to_gguf() const {
  QF_REQUIRE(model_ == TokenizerModel::SentencePiece, source_,
             ": a byte-level BPE vocabulary is written only as its GGUF file holds it");
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  for (std::size_t id = 0; id < pieces_.size(); ++id) {
    tokens.push_back(spaces_to_sentencepiece(pieces_[id]));
    types.push_back(static_cast<std::int32_t>(types_[id]));
  }
  const auto u32 = [](int value) { return GgufValue::u32(static_cast<std::uint32_t>(value)); };
  std::vector<GgufKeyValue> out = {
      {"tokenizer.ggml.model", GgufValue::string("llama")},
      {"tokenizer.ggml.tokens", GgufValue::string_array(tokens)},
      {"tokenizer.ggml.scores", GgufValue::f32_array(scores_)},
      {"tokenizer.ggml.token_type", GgufValue::i32_array(types)},
      {"tokenizer.ggml.bos_token_id", u32(bos_id_)},
      {"tokenizer.ggml.eos_token_id", u32(eos_id_)},
      {"tokenizer.ggml.unknown_token_id", u32(unknown_id_)},
      {"tokenizer.ggml.add_space_prefix", GgufValue::boolean(add_space_prefix_)},
      {"tokenizer.ggml.add_bos_token", GgufValue::boolean(add_bos_)},
      {"tokenizer.ggml.add_eos_token", GgufValue::boolean(add_eos_)}};
  if (end_of_turn_id_ >= 0) out.push_back({"tokenizer.ggml.eot_token_id", u32(end_of_turn_id_)});
  return out;
}

}  // namespace qforge
