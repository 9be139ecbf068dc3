#include "model/tokenizer/tokenizer.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"
#include "model/tokenizer/byte_level.h"
#include "model/tokenizer/pair_merger.h"
#include "model/tokenizer/unicode_text.h"

namespace qforge {

namespace {

// Every byte value once, so a byte token can be returned as a view of one character.
constexpr std::array<char, 256> kByteValues = [] {
  std::array<char, 256> bytes{};
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<char>(b);
  return bytes;
}();

// Parses "<0xNN>" (two upper- or lower-case hex digits); -1 for anything else.
int parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

bool matches_text(TokenType type) {
  return type == TokenType::Normal || type == TokenType::UserDefined;
}

// The byte lengths of text's characters (a malformed byte is a character of its own).
std::vector<std::size_t> char_lengths(std::string_view text) {
  std::vector<std::size_t> lengths;
  lengths.reserve(text.size());
  for (std::size_t pos = 0; pos < text.size();) {
    lengths.push_back(next_char(text, pos).length);
    pos += lengths.back();
  }
  return lengths;
}

std::uint64_t pair_key(int left, int right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
         static_cast<std::uint32_t>(right);
}

}  // namespace

Tokenizer::Tokenizer(TokenizerVocabulary vocabulary, std::string source)
    : source_(std::move(source)),
      model_(vocabulary.model),
      pieces_(std::move(vocabulary.pieces)),
      scores_(std::move(vocabulary.scores)),
      types_(std::move(vocabulary.types)),
      bos_id_(vocabulary.bos_id),
      eos_id_(vocabulary.eos_id),
      unknown_id_(vocabulary.unknown_id),
      end_of_turn_id_(vocabulary.end_of_turn_id),
      add_space_prefix_(vocabulary.add_space_prefix),
      add_bos_(vocabulary.add_bos),
      add_eos_(vocabulary.add_eos),
      pre_(vocabulary.pre),
      ignore_merges_(vocabulary.ignore_merges) {
  const std::size_t n = pieces_.size();
  if (n == 0) fail(source_, ": the vocabulary is empty");
  if (scores_.size() != n || types_.size() != n)
    fail(source_, ": the vocabulary has ", n, " pieces but ", scores_.size(), " scores and ",
         types_.size(), " token types");
  const auto check_id = [&](int id, std::string_view what) {
    if (id < 0 || static_cast<std::size_t>(id) >= n)
      fail(source_, ": ", what, " ", id, " is outside the vocabulary of ", n, " tokens");
  };
  check_id(bos_id_, "BOS id");
  check_id(eos_id_, "EOS id");
  check_id(unknown_id_, "unknown-token id");
  if (end_of_turn_id_ != -1) check_id(end_of_turn_id_, "end-of-turn id");

  byte_ids_.fill(-1);
  for (std::size_t id = 0; id < n; ++id) {
    if (!std::isfinite(scores_[id]))
      fail(source_, ": the score of token ", id, " is ", scores_[id]);
    if (types_[id] == TokenType::Byte) {
      const int byte = parse_byte_piece(pieces_[id]);
      if (byte >= 0 && byte_ids_[byte] < 0) byte_ids_[byte] = static_cast<int>(id);
    } else if (matches_text(types_[id])) {
      piece_ids_.emplace(pieces_[id], static_cast<int>(id));  // the first id of a piece wins
    }
    const bool special = types_[id] == TokenType::Control || types_[id] == TokenType::UserDefined;
    if (special && !pieces_[id].empty()) special_ids_.push_back(static_cast<int>(id));
    if (types_[id] == TokenType::Control) {
      for (std::string_view end :
           {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "</s>"}) {
        if (pieces_[id] == end) end_ids_.push_back(static_cast<int>(id));
      }
    }
  }
  std::stable_sort(special_ids_.begin(), special_ids_.end(),
                   [&](int a, int b) { return pieces_[a].size() > pieces_[b].size(); });
  has_byte_tokens_ = true;
  for (int id : byte_ids_) has_byte_tokens_ = has_byte_tokens_ && id >= 0;

  if (model_ == TokenizerModel::ByteLevelBpe) {
    index_merges(vocabulary.merges);
    decoded_.resize(n);
    for (std::size_t id = 0; id < n; ++id) {
      // A normal piece is byte-level text; user-defined pieces are plain text.
      std::optional<std::string> bytes;
      if (types_[id] == TokenType::Normal) bytes = from_byte_level(pieces_[id]);
      if (const int byte = parse_byte_piece(pieces_[id]);
          types_[id] == TokenType::Byte && byte >= 0)
        bytes = std::string(1, static_cast<char>(byte));
      decoded_[id] = bytes ? std::move(*bytes) : pieces_[id];
    }
  }
}

void Tokenizer::index_merges(const std::vector<std::string>& merges) {
  merge_ranks_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const std::size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 == merge.size())
      fail(source_, ": metadata 'tokenizer.ggml.merges' [", rank, "] is \"", merge,
           "\", not two tokens separated by a space");
    const std::string_view left = std::string_view(merge).substr(0, space);
    const std::string_view right = std::string_view(merge).substr(space + 1);
    const int left_id = find_piece(left);
    const int right_id = find_piece(right);
    if (left_id < 0 || right_id < 0)
      fail(source_, ": metadata 'tokenizer.ggml.merges' [", rank, "] \"", merge, "\" names \"",
           left_id < 0 ? left : right, "\", which is not a token of the vocabulary");
    if (find_piece(std::string(left) + std::string(right)) < 0)
      fail(source_, ": metadata 'tokenizer.ggml.merges' [", rank, "] \"", merge,
           "\" joins into a piece that is not a token of the vocabulary");
    merge_ranks_.emplace(pair_key(left_id, right_id), static_cast<int>(rank));  // first wins
  }
}

std::size_t Tokenizer::checked(int id) const {
  if (id < 0 || id >= vocab_size())
    fail(source_, ": token id ", id, " is outside the vocabulary of ", vocab_size(), " tokens");
  return static_cast<std::size_t>(id);
}

int Tokenizer::find_piece(std::string_view piece) const {
  const auto it = piece_ids_.find(piece);
  return it == piece_ids_.end() ? -1 : it->second;
}

std::vector<Tokenizer::Fragment> Tokenizer::split_special(std::string_view text,
                                                          bool parse_special) const {
  std::vector<Fragment> fragments{{text, -1}};
  for (int id : special_ids_) {
    if (!parse_special && types_[id] != TokenType::UserDefined) continue;
    const std::string_view piece = pieces_[id];
    std::vector<Fragment> next;
    for (const Fragment& fragment : fragments) {
      if (fragment.special_id >= 0) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      for (std::size_t at = rest.find(piece); at != std::string_view::npos; at = rest.find(piece)) {
        if (at > 0) next.push_back({rest.substr(0, at), -1});
        next.push_back({piece, id});
        rest.remove_prefix(at + piece.size());
      }
      if (!rest.empty()) next.push_back({rest, -1});
    }
    fragments = std::move(next);
  }
  return fragments;
}

void Tokenizer::append_symbol(std::string_view text, std::vector<int>& out) const {
  if (const int id = find_piece(text); id >= 0) {
    out.push_back(id);
    return;
  }
  bool all_bytes_known = true;
  for (char c : text)
    all_bytes_known = all_bytes_known && byte_ids_[static_cast<unsigned char>(c)] >= 0;
  if (!all_bytes_known) {
    out.push_back(unknown_id_);
    return;
  }
  for (char c : text) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
}

void Tokenizer::encode_sentencepiece(std::string_view text, bool space_prefix,
                                     std::vector<int>& out) const {
  std::string input;
  input.reserve(text.size() + 1);
  if (space_prefix) input += ' ';
  input += text;
  const std::vector<std::size_t> lengths = char_lengths(input);
  const auto score = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    // Adjacent in `input` (pair_merger.h): the joined piece is a view, no copy.
    const int id = find_piece(std::string_view(left.data(), left.size() + right.size()));
    if (id < 0) return std::nullopt;
    return scores_[id];
  };
  for (std::string_view symbol : merge_pairs(input, lengths, score)) append_symbol(symbol, out);
}

void Tokenizer::encode_byte_level(std::string_view text, std::vector<int>& out) const {
  const auto rank = [&](std::string_view left, std::string_view right) -> std::optional<double> {
    const auto it = merge_ranks_.find(pair_key(find_piece(left), find_piece(right)));
    if (it == merge_ranks_.end()) return std::nullopt;
    return -static_cast<double>(it->second);
  };
  for (std::string_view word : split_words(pre_, text)) {
    const std::string symbols = to_byte_level(word);
    if (ignore_merges_) {
      if (const int id = find_piece(symbols); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    const std::vector<std::size_t> lengths = char_lengths(symbols);
    for (std::string_view symbol : merge_pairs(symbols, lengths, rank)) {
      if (const int id = find_piece(symbol); id >= 0) {
        out.push_back(id);
        continue;
      }
      // Not reachable with a consistent merge list: each character on its own.
      std::size_t pos = 0;
      for (std::size_t length : char_lengths(symbol)) {
        const int id = find_piece(symbol.substr(pos, length));
        out.push_back(id >= 0 ? id : unknown_id_);
        pos += length;
      }
    }
  }
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_bos, bool add_eos,
                                   bool parse_special) const {
  std::vector<int> tokens;
  if (add_bos) tokens.push_back(bos_id_);
  bool after_special = true;  // SentencePiece's prefix space starts each run of text
  for (const Fragment& fragment : split_special(text, parse_special)) {
    if (fragment.special_id >= 0) {
      tokens.push_back(fragment.special_id);
      after_special = true;
      continue;
    }
    if (fragment.text.empty()) continue;
    if (model_ == TokenizerModel::ByteLevelBpe)
      encode_byte_level(fragment.text, tokens);
    else
      encode_sentencepiece(fragment.text, add_space_prefix_ && after_special, tokens);
    after_special = false;
  }
  if (add_eos) tokens.push_back(eos_id_);
  return tokens;
}

std::string_view Tokenizer::decode(int previous, int token) const {
  const std::size_t id = checked(token);
  if (types_[id] == TokenType::Control) return {};
  if (model_ == TokenizerModel::ByteLevelBpe)
    return types_[id] == TokenType::Unused ? std::string_view() : std::string_view(decoded_[id]);
  if (types_[id] == TokenType::Byte) {
    const int byte = parse_byte_piece(pieces_[id]);
    if (byte >= 0) return {&kByteValues[static_cast<std::size_t>(byte)], 1};
  }
  std::string_view piece = pieces_[id];
  if (previous == bos_id_ && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
  return piece;
}

}  // namespace qforge
