// qforge chat -m MODEL [--messages FILE.json] [--system TEXT] [--chat-template NAME]
//             [-n N] [-c CTX] [--temp T] [--top-k K] [--top-p P] [--seed S] [model options]
// A conversation in the model's chat format (chat_format.h), the KV cache kept between
// turns (chat_session.h):
//   --messages FILE  a JSON array of {"role", "content"} (system, user, assistant), the
//                    last one the user's: prints the assistant's reply
//   otherwise        each line of stdin is a user turn; on a terminal with a "> " prompt;
//                    "/exit" or end of input ends it
// Replies go to stdout, one per turn; load and per-turn statistics to stderr.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/chat_options.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/sampling_options.h"
#include "jit/base/error.h"
#include "model/runtime/chat_session.h"
#include "model/runtime/model_session.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  std::string messages;
  ChatFlags chat;
  SamplingFlags sampling;
  int steps = 512;
  int ctx = 4096;
};

// The messages of a JSON file; errors name the file and the message.
std::vector<ChatMessage> read_messages(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path, ": cannot open the messages file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(path, ": not JSON (", e.what(), ")");
  }
  if (!j.is_array() || j.empty())
    fail(path, ": expected a non-empty JSON array of {\"role\", \"content\"} messages");
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& m = j[i];
    const auto text = [&](const char* field) {
      if (!m.is_object() || !m.contains(field) || !m[field].is_string())
        fail(path, ": message ", i, ": '", field, "' is missing or not a string");
      return m[field].get<std::string>();
    };
    messages.push_back({text("role"), text("content")});
    const std::string& role = messages.back().role;
    if (role != "system" && role != "user" && role != "assistant")
      fail(path, ": message ", i, ": 'role' is \"", role, "\", not system, user or assistant");
  }
  if (messages.back().role != "user")
    fail(path, ": message ", messages.size() - 1, ": the last message is the ",
         messages.back().role, "'s; qforge replies to a user message");
  return messages;
}

void report(const GenerationStats& stats, const ChatSession& chat) {
  std::fprintf(stderr, "[%d prompt tokens, %.1f tok/s; %d reply tokens, %.1f tok/s; %d cached]\n",
               stats.prompt_tokens, stats.prefill_tokens_per_second(), stats.generated_tokens,
               stats.decode_tokens_per_second(), chat.cached_tokens());
}

void chat(const Options& o) {
  const std::vector<ChatMessage> given =
      o.messages.empty() ? std::vector<ChatMessage>{} : read_messages(o.messages);
  const AppliedModelOptions applied = apply_model_options(o.model);
  auto session = open_model_session(o.model, model_precision(o.model), applied.threads, 1);
  const LoadedModel& model = session->model;
  const int positions = std::min(model.weights.config.seq_len, o.ctx);
  session->executor =
      std::make_unique<LlamaExecutor>(session->model.weights, *session->pool, positions);
  const ChatFormat format = chosen_chat_format(o.chat, model);
  std::fprintf(stderr, "qforge chat: %s, chat format %s, context %d tokens, policy: %s\n",
               o.model.model.c_str(), std::string(chat_format_name(format)).c_str(), positions,
               policy_summary(model.weights).c_str());

  Sampler sampler = make_sampler(o.sampling);
  ChatSession chat(*session->executor, model.tokenizer, sampler, format);
  if (!o.chat.system.empty()) chat.add({"system", o.chat.system});
  const auto print = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };

  if (!given.empty()) {
    for (std::size_t i = 0; i + 1 < given.size(); ++i) chat.add(given[i]);
    report(chat.reply(given.back().content, o.steps, print), chat);
    std::printf("\n");
    return;
  }
  const bool terminal = ::isatty(STDIN_FILENO) != 0;
  if (terminal) std::fprintf(stderr, "(one message per line; /exit or Ctrl-D ends)\n");
  std::string line;
  for (;;) {
    if (terminal) std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line.empty()) continue;
    const GenerationStats stats = chat.reply(line, o.steps, print);
    std::printf("\n");
    std::fflush(stdout);
    report(stats, chat);
  }
}

}  // namespace

void register_chat(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("chat", "Chat with a model in its chat format");
  add_model_options(cmd, options->model);
  cmd->add_option("--messages", options->messages,
                  "JSON array of {role, content} messages; reply to the last (a user's)");
  add_chat_options(cmd, options->chat);
  cmd->add_option("-n,--n-predict", options->steps, "Tokens per reply at most (default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("-c,--ctx", options->ctx,
                  "Context for the conversation, capped at the model's (default 4096)")
      ->check(CLI::PositiveNumber);
  add_sampling_options(cmd, options->sampling);
  cmd->callback([options] { chat(*options); });
}

}  // namespace qforge::cli
