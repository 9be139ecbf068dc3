#include "model/tokenizer/pair_merger.h"

#include <queue>

namespace qforge {

namespace {

// A run of the text, linked to its neighbours; length 0 once merged into the left.
struct Symbol {
  std::size_t start = 0;
  std::size_t length = 0;
  int previous = -1;
  int next = -1;
};

// A candidate merge of symbols left and right (adjacent when queued). It is stale if either
// symbol has since merged with something else, which changes the combined length.
struct Candidate {
  double priority;
  int left;
  int right;
  std::size_t length;
};

// Highest priority first; among equal priorities, the leftmost pair.
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;
  }
};

}  // namespace

std::vector<std::string_view> merge_pairs(std::string_view text,
                                          std::span<const std::size_t> lengths,
                                          const MergePriority& priority) {
  std::vector<Symbol> symbols;
  symbols.reserve(lengths.size());
  std::size_t start = 0;
  for (std::size_t length : lengths) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({start, length, index - 1, -1});
    if (index > 0) symbols[index - 1].next = index;
    start += length;
  }
  if (symbols.empty()) return {};

  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  const auto propose = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[left];
    const Symbol& r = symbols[right];
    const std::optional<double> p =
        priority(text.substr(l.start, l.length), text.substr(r.start, r.length));
    if (p) queue.push({*p, left, right, l.length + r.length});
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

  std::vector<std::string_view> out;
  for (int i = 0; i >= 0; i = symbols[i].next)
    out.push_back(text.substr(symbols[i].start, symbols[i].length));
  return out;
}

}  // namespace qforge
