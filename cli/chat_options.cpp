#include "cli/chat_options.h"

namespace qforge::cli {

void add_chat_options(CLI::App* cmd, ChatFlags& flags) {
  cmd->add_option("--system", flags.system, "A system message to start the conversation with");
  cmd->add_option("--chat-template", flags.chat_template,
                  "Chat format: llama2, llama3 or chatml (default: from the model's "
                  "tokenizer.chat_template, else its special tokens)")
      ->check(CLI::IsMember({"llama2", "llama3", "chatml"}));
}

ChatFormat chosen_chat_format(const ChatFlags& flags, const LoadedModel& model) {
  if (!flags.chat_template.empty()) return *chat_format_named(flags.chat_template);
  return chat_format_for(model.chat_template, model.tokenizer);
}

}  // namespace qforge::cli
