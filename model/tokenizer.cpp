#include "model/tokenizer.h"

#include <cmath>
#include <queue>

#include "jit/base/error.h"

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

// Length of the UTF-8 character starting at text[pos]: 1 to 4, or 1 for a byte that does
// not start a well-formed sequence (it then falls back to a byte token on its own).
std::size_t utf8_length(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  std::size_t length = 1;
  if (lead >= 0xc2 && lead <= 0xdf)
    length = 2;
  else if (lead >= 0xe0 && lead <= 0xef)
    length = 3;
  else if (lead >= 0xf0 && lead <= 0xf4)
    length = 4;
  if (pos + length > text.size()) return 1;
  for (std::size_t i = 1; i < length; ++i) {
    if ((static_cast<unsigned char>(text[pos + i]) & 0xc0) != 0x80) return 1;
  }
  return length;
}

bool matches_text(TokenType type) {
  return type == TokenType::Normal || type == TokenType::UserDefined;
}

// A run of the input text, linked to its neighbours; length 0 once merged into the left.
struct Symbol {
  std::size_t start = 0;
  std::size_t length = 0;
  int previous = -1;
  int next = -1;
};

// A candidate merge of symbols left and right (adjacent when queued). It is stale if either
// symbol has since merged with something else, which changes the combined length.
struct Candidate {
  float score;
  int left;
  int right;
  std::size_t length;
};

// Highest score first; among equal scores, the leftmost pair.
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    return a.left > b.left;
  }
};

}  // namespace

Tokenizer::Tokenizer(TokenizerVocabulary vocabulary, std::string source)
    : source_(std::move(source)),
      pieces_(std::move(vocabulary.pieces)),
      scores_(std::move(vocabulary.scores)),
      types_(std::move(vocabulary.types)),
      bos_id_(vocabulary.bos_id),
      eos_id_(vocabulary.eos_id),
      unknown_id_(vocabulary.unknown_id),
      add_space_prefix_(vocabulary.add_space_prefix) {
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
  }
  has_byte_tokens_ = true;
  for (int id : byte_ids_) has_byte_tokens_ = has_byte_tokens_ && id >= 0;
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

std::vector<int> Tokenizer::encode(std::string_view text, bool add_bos, bool add_eos) const {
  std::vector<int> tokens;
  if (add_bos) tokens.push_back(bos_id_);
  if (!text.empty()) {
    std::string input;
    input.reserve(text.size() + 1);
    if (add_space_prefix_) input += ' ';
    input += text;

    std::vector<Symbol> symbols;
    for (std::size_t pos = 0; pos < input.size();) {
      const std::size_t length = utf8_length(input, pos);
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({pos, length, index - 1, -1});
      if (index > 0) symbols[index - 1].next = index;
      pos += length;
    }

    std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
    const auto propose = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const std::size_t length = symbols[left].length + symbols[right].length;
      const int id = find_piece(std::string_view(input).substr(symbols[left].start, length));
      if (id >= 0) queue.push({scores_[id], left, right, length});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) propose(i - 1, i);

    while (!queue.empty()) {
      const Candidate best = queue.top();
      queue.pop();
      Symbol& left = symbols[best.left];
      Symbol& right = symbols[best.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != best.length)
        continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (left.next >= 0) symbols[left.next].previous = best.left;
      propose(left.previous, best.left);
      propose(best.left, left.next);
    }

    for (int i = 0; i >= 0; i = symbols[i].next)
      append_symbol(std::string_view(input).substr(symbols[i].start, symbols[i].length), tokens);
  }
  if (add_eos) tokens.push_back(eos_id_);
  return tokens;
}

std::string_view Tokenizer::decode(int previous, int token) const {
  const std::size_t id = checked(token);
  if (types_[id] == TokenType::Control) return {};
  if (types_[id] == TokenType::Byte) {
    const int byte = parse_byte_piece(pieces_[id]);
    if (byte >= 0) return {&kByteValues[static_cast<std::size_t>(byte)], 1};
  }
  std::string_view piece = pieces_[id];
  if (previous == bos_id_ && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
  return piece;
}

std::string_view Tokenizer::safe_piece(std::string_view piece) {
  if (piece.size() != 1) return piece;
  const auto c = static_cast<unsigned char>(piece[0]);
  const bool printable = c >= 0x20 && c < 0x7f;
  const bool whitespace = c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  return printable || whitespace ? piece : std::string_view();
}

}  // namespace qforge
