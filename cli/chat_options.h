// The chat flags run --chat and chat share: --system, --chat-template.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "model/runtime/chat_format.h"
#include "model/runtime/model_loader.h"

namespace qforge::cli {

struct ChatFlags {
  std::string system;         // a system message first, if not empty
  std::string chat_template;  // llama2, llama3, chatml; empty: the model's
};

void add_chat_options(CLI::App* cmd, ChatFlags& flags);
// The --chat-template format, else the one the model's template or vocabulary implies.
ChatFormat chosen_chat_format(const ChatFlags& flags, const LoadedModel& model);

}  // namespace qforge::cli
