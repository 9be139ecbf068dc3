// qforge run -m MODEL [-p PROMPT] [-n N] [--chat [--system TEXT] [--chat-template NAME]]
//            [--temp T] [--top-k K] [--top-p P] [--seed S]
//            [--quant Q] [--lm-head int8|f32|bf16] [-t N] [--max-isa ISA] [--amx MODE]
//            [--tokenizer FILE] [--tuning FILE | --no-tuning]
// Loads the model (quantize, pack and JIT every kernel up front), prefills the prompt as
// one batch and streams the generated text to stdout; the stats go to stderr. With --chat
// the prompt is one user message in the model's chat format, and the reply is printed.
// Everything after the options goes through the C API (include/qforge.h).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/chat_options.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/sampling_options.h"
#include "include/qforge.h"
#include "jit/base/error.h"
#include "model/runtime/chat_format.h"

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

// The C API's token callback: prints each piece as it comes.
int print_piece(const char* text, std::size_t length, std::int32_t, void*) {
  std::fwrite(text, 1, length, stdout);
  std::fflush(stdout);
  return 0;
}

// Throws the C API's last error when `result` says a call failed.
void check(int result) {
  if (result < 0) throw Error(qf_last_error());
}

void run(const Options& o) {
  const AppliedModelOptions applied = apply_model_options(o.model);
  const std::unique_ptr<qf_model> model = open_model_handle(o.model, applied.threads);
  const LoadedModel& loaded = model->session->model;

  // The prompt: the text, or one user message (after --system) in the chat format.
  std::string text = o.prompt;
  if (o.chat) {
    std::vector<const char*> roles, contents;
    if (!o.chat_flags.system.empty()) {
      roles.push_back("system");
      contents.push_back(o.chat_flags.system.c_str());
    }
    roles.push_back("user");
    contents.push_back(o.prompt.c_str());
    const char* format = o.chat_flags.chat_template.c_str();
    const int n = static_cast<int>(roles.size());
    const int length =
        qf_chat_prompt(model.get(), format, roles.data(), contents.data(), n, nullptr, 0);
    check(length);
    text.assign(static_cast<std::size_t>(length) + 1, '\0');
    check(qf_chat_prompt(model.get(), format, roles.data(), contents.data(), n, text.data(),
                         text.size()));
    text.resize(static_cast<std::size_t>(length));
  }
  // The cache holds the prompt and what follows it, up to the model's context.
  const int prompt_tokens = qf_tokenize(model.get(), text.data(), text.size(), 1, nullptr, 0);
  check(prompt_tokens);
  const auto positions = std::min<long long>(qf_model_context_length(model.get()),
                                             prompt_tokens + static_cast<long long>(o.steps));
  const std::unique_ptr<qf_sequence> sequence(
      qf_sequence_new(model.get(), static_cast<int>(std::max(1LL, positions))));
  if (!sequence) throw Error(qf_last_error());

  const std::vector<GemmKey> keys = loaded.weights.warmup_keys();
  std::fprintf(stderr,
               "qforge run: %s (%s)\n"
               "load %.1f ms, pack %.1f ms, JIT %.1f ms (%zu kernels), weights %.1f MiB, "
               "KV cache %.1f MiB; %s\n"
               "policy: %s%s\n",
               o.model.model.c_str(), qf_model_description(model.get()), loaded.load_seconds * 1e3,
               loaded.pack_seconds * 1e3, loaded.jit_seconds * 1e3, loaded.kernels,
               static_cast<double>(loaded.weights.weight_bytes()) / (1 << 20),
               static_cast<double>(sequence->executor->cache().bytes()) / (1 << 20),
               tuning_summary(applied.tuning, keys).c_str(), policy_summary(loaded.weights).c_str(),
               o.chat ? ("\nchat format: " +
                         std::string(chat_format_name(chosen_chat_format(o.chat_flags, loaded))))
                            .c_str()
                      : "");

  qf_generate_params params = qf_generate_default_params();
  params.max_tokens = o.steps;
  params.temperature = o.sampling.temperature;
  params.top_k = o.sampling.top_k;
  params.top_p = o.sampling.top_p;
  params.seed = sampling_seed(o.sampling);
  params.echo_prompt = o.chat ? 0 : 1;  // run.c prints the prompt; a chat prints the reply
  if (o.chat) params.max_tokens = std::max(1, o.steps);
  qf_generate_stats stats{};
  check(qf_generate(sequence.get(), text.c_str(), &params, print_piece, nullptr, &stats));
  std::printf("\n");
  std::fflush(stdout);
  const auto rate = [](int tokens, double seconds) { return seconds > 0 ? tokens / seconds : 0.0; };
  std::fprintf(stderr,
               "prefill: %d tokens, %.1f tok/s; decode: %d tokens, %.1f tok/s; "
               "peak RSS %.1f MiB\n",
               stats.prompt_tokens, rate(stats.prompt_tokens, stats.prefill_seconds),
               stats.generated_tokens, rate(stats.decode_tokens, stats.decode_seconds),
               peak_rss_mib());
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
