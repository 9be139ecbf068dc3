#include "model/runtime/chat_session.h"

#include "jit/base/error.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

ChatSession::ChatSession(LlamaExecutor& executor, const Tokenizer& tokenizer, Sampler& sampler,
                         ChatFormat format)
    : executor_(executor), tokenizer_(tokenizer), sampler_(sampler), format_(format) {}

void ChatSession::add(ChatMessage message) {
  messages_.push_back(std::move(message));
}

GenerationStats ChatSession::reply(std::string_view user, int max_tokens,
                                   const std::function<void(std::string_view)>& on_text) {
  QF_REQUIRE(max_tokens >= 1, "chat: a reply needs at least one token (got ", max_tokens, ")");
  messages_.push_back({"user", std::string(user)});
  std::vector<int> tokens =
      tokenizer_.encode_prompt(render_chat(format_, messages_, /*add_generation_prompt=*/true));
  if (tokens.empty()) tokens.push_back(tokenizer_.bos_id());
  QF_REQUIRE(static_cast<int>(tokens.size()) < executor_.positions(), "chat: the conversation (",
             tokens.size(), " tokens) fills the context of ", executor_.positions(), " tokens");
  // Reuse the cached prefix; at least the last token runs, for its logits.
  std::size_t reused = 0;
  while (reused + 1 < tokens.size() && reused < cached_.size() && cached_[reused] == tokens[reused])
    ++reused;
  const std::span<const int> added = std::span<const int>(tokens).subspan(reused);

  std::string answer;
  GenerationStats stats = continue_generation(executor_, tokenizer_, sampler_, added,
                                              static_cast<int>(reused), max_tokens,
                                              {[&](std::string_view piece) {
                                                 answer.append(piece);
                                                 on_text(piece);
                                               },
                                               /*echo_prompt=*/false,
                                               {}});
  messages_.push_back({"assistant", answer});
  // The cache holds the prompt and the reply tokens fed back (all of them when the model
  // ended its turn, all but the last when the budget ran out).
  cached_ = std::move(tokens);
  const std::size_t fed = static_cast<std::size_t>(stats.next_position) - cached_.size();
  cached_.insert(cached_.end(), stats.generated.begin(),
                 stats.generated.begin() + static_cast<std::ptrdiff_t>(fed));
  return stats;
}

}  // namespace qforge
