// SentencePiece-style BPE tokenizer, as llama2.c's run.c and llama.cpp's SPM tokenizer
// apply it to Llama vocabularies.
//
// encode(text):
//   1. prepend " " to non-empty text (the SentencePiece dummy prefix)
//   2. split into UTF-8 characters; each is one symbol (each byte of a malformed sequence
//      is a symbol of its own)
//   3. repeatedly merge the adjacent pair whose concatenation is a vocabulary piece with
//      the highest score (the leftmost pair on ties), until no pair is a piece
//   4. each symbol becomes its piece id; a symbol that is not a piece becomes the byte
//      tokens "<0xNN>" of its bytes, or <unk> when the vocabulary has no byte tokens
//
// Pieces are stored with ' ' where SentencePiece writes U+2581. Byte, control and unknown
// tokens never match text; they are reached only through step 4 or by id.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jit/base/error.h"

namespace qforge {

class GgufReader;

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : std::int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct TokenizerVocabulary {
  std::vector<std::string> pieces;  // spaces as ' '
  std::vector<float> scores;        // merge priority: higher merges first
  std::vector<TokenType> types;
  int bos_id = 1;
  int eos_id = 2;
  int unknown_id = 0;
  bool add_space_prefix = true;
};

class Tokenizer {
 public:
  // Validates the vocabulary (sizes agree, special ids in range, scores are numbers);
  // `source` names it in error messages.
  Tokenizer(TokenizerVocabulary vocabulary, std::string source);

  // llama2.c tokenizer.bin:
  //   u32 max_token_length
  //   vocab_size x { f32 score; i32 length; length bytes of the piece }
  // Ids 0, 1, 2 are <unk>, BOS, EOS; pieces "<0xNN>" are byte tokens. With
  // expected_vocab_size >= 0 the file must hold exactly that many records.
  static Tokenizer from_llama2c_file(const std::string& path, int expected_vocab_size = -1);
  // tokenizer.ggml.{model, tokens, scores, token_type, bos_token_id, eos_token_id,
  // unknown_token_id, add_space_prefix}; the model must be "llama" (SentencePiece).
  static Tokenizer from_gguf(const GgufReader& gguf);

  std::vector<int> encode(std::string_view text, bool add_bos, bool add_eos) const;

  // The bytes token `token` contributes to the output after `previous`: the piece, with its
  // leading space removed right after BOS, a byte token as its raw byte, and nothing for
  // control tokens. The view stays valid as long as the tokenizer.
  std::string_view decode(int previous, int token) const;
  // "" for a single byte that is neither printable ASCII nor whitespace, else `piece`.
  static std::string_view safe_piece(std::string_view piece);

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  int unknown_id() const { return unknown_id_; }
  bool has_byte_tokens() const { return has_byte_tokens_; }
  const std::string& piece(int id) const { return pieces_.at(checked(id)); }
  float score(int id) const { return scores_.at(checked(id)); }
  TokenType type(int id) const { return types_.at(checked(id)); }
  // Id of the text piece `piece`, or -1 (byte, control and unknown tokens are not found).
  int find_piece(std::string_view piece) const;

 private:
  struct TransparentHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const {
      return std::hash<std::string_view>{}(text);
    }
  };

  std::size_t checked(int id) const;
  void append_symbol(std::string_view text, std::vector<int>& out) const;

  std::string source_;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  int bos_id_ = 1;
  int eos_id_ = 2;
  int unknown_id_ = 0;
  bool add_space_prefix_ = true;
  bool has_byte_tokens_ = false;
  std::array<int, 256> byte_ids_{};  // -1 where the vocabulary lacks "<0xNN>"
  std::unordered_map<std::string, int, TransparentHash, std::equal_to<>> piece_ids_;
};

}  // namespace qforge
