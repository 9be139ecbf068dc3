// The two tokenizers of Llama-family files, behind one interface.
//
// SentencePiece BPE ("llama": llama2.c files and Llama 1/2, Mistral GGUF files), as run.c
// and llama.cpp's SPM tokenizer apply it:
//   1. prepend " " to non-empty text (the SentencePiece dummy prefix)
//   2. split into UTF-8 characters; each is one symbol (each byte of a malformed sequence
//      is a symbol of its own)
//   3. repeatedly merge the adjacent pair whose concatenation is a vocabulary piece with
//      the highest score (the leftmost pair on ties), until no pair is a piece
//   4. each symbol becomes its piece id; a symbol that is not a piece becomes the byte
//      tokens "<0xNN>" of its bytes, or <unk> when the vocabulary has no byte tokens
//   Pieces are stored with ' ' where SentencePiece writes U+2581.
//
// Byte-level BPE ("gpt2": Llama 3, Qwen2, GPT-2), as tiktoken and Hugging Face apply it:
//   1. the pre-tokenizer (pretokenizer.h) splits the text into words
//   2. each word's bytes are written in the byte-level alphabet (byte_level.h) and split
//      into characters; a word that is a token is that token when merges are ignored
//      (llama-bpe)
//   3. repeatedly merge the adjacent pair with the lowest rank in the merge list (the
//      leftmost on ties)
//   4. each symbol becomes its token id
//
// Both: special tokens (control and user-defined; user-defined only unless parse_special)
// are matched whole in the text first, longest first, and the text between them is
// encoded as above. Byte, control and unknown tokens never match text otherwise.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jit/base/error.h"
#include "model/format/gguf_types.h"
#include "model/tokenizer/pretokenizer.h"

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

enum class TokenizerModel { SentencePiece, ByteLevelBpe };

struct TokenizerVocabulary {
  TokenizerModel model = TokenizerModel::SentencePiece;
  std::vector<std::string> pieces;  // SentencePiece: spaces as ' '; BPE: byte-level text
  std::vector<float> scores;        // SentencePiece merge priority: higher merges first
  std::vector<TokenType> types;
  std::vector<std::string> merges;  // BPE: "left right", earlier merges first
  PreTokenizer pre = PreTokenizer::Gpt2;
  bool ignore_merges = false;  // BPE: a word that is a token is that token
  int bos_id = 1;
  int eos_id = 2;
  int unknown_id = 0;
  int end_of_turn_id = -1;  // -1: none
  bool add_space_prefix = true;
  bool add_bos = true;  // what a prompt gets (tokenizer.ggml.add_bos_token)
  bool add_eos = false;
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
  // tokenizer.ggml.{model, tokens, scores, token_type, merges, pre, bos_token_id,
  // eos_token_id, unknown_token_id, eot_token_id, add_space_prefix, add_bos_token,
  // add_eos_token}; the model must be "llama" (SentencePiece) or "gpt2" (byte-level BPE).
  static Tokenizer from_gguf(const GgufReader& gguf);
  // The inverse of from_gguf for a SentencePiece vocabulary (what llama.cpp's converter
  // writes for a llama2.c tokenizer.bin): tokenizer.ggml.model "llama", tokens (spaces
  // back to U+2581), scores, token_type, the special ids, add_space_prefix, add_bos_token,
  // add_eos_token. Throws for a byte-level BPE vocabulary (those come from GGUF files).
  std::vector<GgufKeyValue> to_gguf() const;

  // parse_special: control tokens written in the text ("<|eot_id|>") are those tokens.
  std::vector<int> encode(std::string_view text, bool add_bos, bool add_eos,
                          bool parse_special = false) const;
  // What a prompt becomes: BOS / EOS as the vocabulary asks, special tokens parsed.
  std::vector<int> encode_prompt(std::string_view text) const {
    return encode(text, add_bos_, add_eos_, /*parse_special=*/true);
  }

  // The bytes token `token` contributes to the output after `previous`: the piece (a
  // byte-level piece as its bytes), a SentencePiece piece with its leading space removed
  // right after BOS, a byte token as its raw byte, and nothing for control tokens (nor for
  // a byte-level vocabulary's unused ones). A piece
  // may end inside a UTF-8 character (utf8_stream.h joins them). The view stays valid as
  // long as the tokenizer.
  std::string_view decode(int previous, int token) const;

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  int unknown_id() const { return unknown_id_; }
  int end_of_turn_id() const { return end_of_turn_id_; }
  bool adds_bos() const { return add_bos_; }
  // The id that starts each chunk of a text (perplexity, calibration): BOS when the
  // vocabulary adds it, else -1.
  int prompt_bos_id() const { return add_bos_ ? bos_id_ : -1; }
  TokenizerModel model() const { return model_; }
  // EOS, the end-of-turn token, or a control token chat formats end a turn with
  // (<|eot_id|>, <|eom_id|>, <|im_end|>, <|end|>, <|endoftext|>, </s>): generation stops there.
  bool ends_generation(int id) const {
    return id == eos_id_ || id == end_of_turn_id_ ||
           std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
  }
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

  // A run of the text: raw text to encode, or a special token matched whole.
  struct Fragment {
    std::string_view text;
    int special_id = -1;
  };

  std::size_t checked(int id) const;
  void index_merges(const std::vector<std::string>& merges);
  std::vector<Fragment> split_special(std::string_view text, bool parse_special) const;
  void encode_sentencepiece(std::string_view text, bool space_prefix, std::vector<int>& out) const;
  void encode_byte_level(std::string_view text, std::vector<int>& out) const;
  void append_symbol(std::string_view text, std::vector<int>& out) const;

  std::string source_;
  TokenizerModel model_ = TokenizerModel::SentencePiece;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  int bos_id_ = 1;
  int eos_id_ = 2;
  int unknown_id_ = 0;
  int end_of_turn_id_ = -1;
  bool add_space_prefix_ = true;
  bool add_bos_ = true;
  bool add_eos_ = false;
  bool has_byte_tokens_ = false;
  PreTokenizer pre_ = PreTokenizer::Gpt2;
  bool ignore_merges_ = false;
  std::vector<std::string> decoded_;  // BPE: each token's bytes
  std::vector<int> special_ids_;      // control and user-defined, longest piece first
  std::vector<int> end_ids_;          // control tokens that end a turn
  std::unordered_map<std::uint64_t, int> merge_ranks_;  // (left id << 32 | right id) -> rank
  std::array<int, 256> byte_ids_{};                     // -1 where the vocabulary lacks "<0xNN>"
  std::unordered_map<std::string, int, TransparentHash, std::equal_to<>> piece_ids_;
};

}  // namespace qforge
