// Pre-tokenizers of byte-level BPE vocabularies: text -> words, each word merged on its
// own. Each splitter is a hand-written matcher of the regular expression its `pre` type
// names in GGUF (`tokenizer.ggml.pre`), tried at each position, first alternative that
// matches wins, as a backtracking regex engine would:
//
//   gpt-2     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama-bpe (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2     as llama-bpe, with \p{N} (one digit per word) for \p{N}{1,3}
//
//   "Hello world's 12345!"  --llama-bpe-->  "Hello" " world" "'s" " " "123" "45" "!"
//
// Malformed UTF-8 bytes are characters of no class (they split as punctuation does).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace qforge {

enum class PreTokenizer { Gpt2, Llama3, Qwen2 };

// The pre-tokenizer a `tokenizer.ggml.pre` value names ("gpt-2"/"default", "llama-bpe"/
// "llama3", "qwen2"), or nullopt.
std::optional<PreTokenizer> pretokenizer_named(std::string_view name);
// Comma-separated names pretokenizer_named accepts, for error messages.
std::string_view known_pretokenizers();

// Splits `text` into consecutive words that cover it exactly.
std::vector<std::string_view> split_words(PreTokenizer pre, std::string_view text);

}  // namespace qforge
