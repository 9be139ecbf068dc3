// A conversation with a model that keeps its KV cache between turns:
//
//   turn n: tokens = encode_prompt(render_chat(messages + user, generation prompt))
//           the cache holds `cached_` (the tokens run so far): only the tokens after the
//           longest prefix the two share are run, then the reply is sampled until the
//           model ends its turn. Earlier turns rendered differently (a template that
//           strips a reply) cost only the tokens from where they differ.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/runtime/chat_format.h"
#include "model/runtime/generation.h"

namespace qforge {

class ChatSession {
 public:
  // All four must outlive the session; the executor's cache is the conversation's.
  ChatSession(LlamaExecutor& executor, const Tokenizer& tokenizer, Sampler& sampler,
              ChatFormat format);

  // Adds a message without generating (a system prompt, or earlier turns to continue).
  void add(ChatMessage message);
  // Adds the user's message and generates the assistant's reply (streamed through
  // on_text, at most max_tokens tokens), which joins the conversation. Throws when the
  // conversation no longer fits the context.
  GenerationStats reply(std::string_view user, int max_tokens,
                        const std::function<void(std::string_view)>& on_text);

  const std::vector<ChatMessage>& messages() const { return messages_; }
  ChatFormat format() const { return format_; }
  int cached_tokens() const { return static_cast<int>(cached_.size()); }

 private:
  LlamaExecutor& executor_;
  const Tokenizer& tokenizer_;
  Sampler& sampler_;
  ChatFormat format_;
  std::vector<ChatMessage> messages_;
  std::vector<int> cached_;  // the tokens at cache positions [0, size)
};

}  // namespace qforge
