// The merge loop both BPE flavours share: symbols of a text, linked left to right,
// repeatedly join the adjacent pair of highest priority (the leftmost one on ties) until
// no adjacent pair has a priority.
//
//   SentencePiece: priority(l, r) = score of the piece l+r, if it is one
//   byte-level BPE: priority(l, r) = -rank of the merge "l r", if the list has it
//
//   "l o w e r"  ->  "lo w e r"  ->  "low e r"  ->  "low er"  (no pair left)
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace qforge {

using MergePriority =
    std::function<std::optional<double>(std::string_view left, std::string_view right)>;

// `lengths` splits `text` into the initial symbols (they must sum to text.size()).
// `priority` gets views into `text` of two adjacent symbols: left.data() + left.size() is
// right.data(), so the pair joined is a view too.
std::vector<std::string_view> merge_pairs(std::string_view text,
                                          std::span<const std::size_t> lengths,
                                          const MergePriority& priority);

}  // namespace qforge
