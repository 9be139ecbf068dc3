// qforge run -m MODEL [-p PROMPT] [-n N] [--chat [--system TEXT] [--chat-template NAME]]
//            [--temp T] [--top-k K] [--top-p P] [--seed S]
//            [--quant Q] [--lm-head int8|f32|bf16] [-t N] [--max-isa ISA] [--amx MODE]
//            [--tokenizer FILE] [--tuning FILE | --no-tuning]
// Loads the model (quantize, pack and JIT every kernel up front), prefills the prompt as
// one batch and streams the generated text to stdout; the stats go to stderr. With --chat
// the prompt is one user message in the model's chat format, and the reply is printed.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "cli/chat_options.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/sampling_options.h"
#include "jit/cpu/isa.h"
#include "model/runtime/chat_session.h"
#include "model/runtime/generation.h"
#include "model/runtime/model_session.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  std::string prompt;
  int steps = 256;
  SamplingFlags sampling;
  bool chat = false;
  ChatFlags chat_flags;
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void run(const Options& o) {
  const AppliedModelOptions applied = apply_model_options(o.model);
  const Precision precision = model_precision(o.model);
  Sampler sampler = make_sampler(o.sampling);

  // The cache holds the prompt and what follows it, up to the model's context: the
  // prompt's length is known once the tokenizer is, so the session is sized after load.
  auto session = open_model_session(o.model, precision, applied.threads, 1);
  const LoadedModel& model = session->model;
  std::optional<ChatFormat> format;
  std::vector<ChatMessage> history;
  if (o.chat) {
    format = chosen_chat_format(o.chat_flags, model);
    if (!o.chat_flags.system.empty()) history.push_back({"system", o.chat_flags.system});
  }
  std::vector<ChatMessage> conversation = history;
  conversation.push_back({"user", o.prompt});
  const std::string text = format ? render_chat(*format, conversation, true) : o.prompt;
  const auto prompt_tokens = static_cast<long long>(model.tokenizer.encode_prompt(text).size());
  const auto positions = std::min<long long>(model.weights.config.seq_len, prompt_tokens + o.steps);
  session->executor = std::make_unique<LlamaExecutor>(session->model.weights, *session->pool,
                                                      static_cast<int>(std::max(1LL, positions)));
  LlamaExecutor& executor = *session->executor;
  const LlamaConfig& c = model.weights.config;
  const std::vector<GemmKey> keys = model.weights.warmup_keys();
  std::fprintf(stderr,
               "qforge run: %s (dim %d, %d layers, %d heads / %d kv, vocab %d), %s, %s kernels, "
               "%d threads\n"
               "load %.1f ms, pack %.1f ms, JIT %.1f ms (%zu kernels), weights %.1f MiB, "
               "KV cache %.1f MiB; %s\n"
               "policy: %s%s\n",
               o.model.model.c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
               to_string(precision).c_str(), std::string(isa_name(best_isa())).c_str(),
               applied.threads, model.load_seconds * 1e3, model.pack_seconds * 1e3,
               model.jit_seconds * 1e3, model.kernels,
               static_cast<double>(model.weights.weight_bytes()) / (1 << 20),
               static_cast<double>(executor.cache().bytes()) / (1 << 20),
               tuning_summary(applied.tuning, keys).c_str(), policy_summary(model.weights).c_str(),
               format ? ("\nchat format: " + std::string(chat_format_name(*format))).c_str() : "");

  const auto print = [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  GenerationStats stats;
  if (format) {
    ChatSession chat(executor, model.tokenizer, sampler, *format);
    for (ChatMessage& m : history) chat.add(std::move(m));
    stats = chat.reply(o.prompt, std::max(1, o.steps), print);
  } else {
    stats = generate(executor, model.tokenizer, sampler, o.prompt, o.steps, print);
  }
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr,
               "prefill: %d tokens, %.1f tok/s; decode: %d tokens, %.1f tok/s; "
               "peak RSS %.1f MiB\n",
               stats.prompt_tokens, stats.prefill_tokens_per_second(), stats.generated_tokens,
               stats.decode_tokens_per_second(), peak_rss_mib());
}

}  // namespace

void register_run(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("run", "Generate text from a prompt (streams to stdout)");
  add_model_options(cmd, options->model);
  cmd->add_option("-p,--prompt", options->prompt, "Prompt text (\"\": start from BOS only)");
  cmd->add_option("-n,--n-predict", options->steps, "Tokens to generate (default 256)")
      ->check(CLI::NonNegativeNumber);
  add_sampling_options(cmd, options->sampling);
  cmd->add_flag("--chat", options->chat,
                "The prompt is a user message in the model's chat format; print the reply");
  add_chat_options(cmd, options->chat_flags);
  cmd->callback([options] { run(*options); });
}

}  // namespace qforge::cli
