// qforge run -m MODEL [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S]
//            [--quant Q] [--lm-head int8|f32] [-t N] [--max-isa ISA] [--tokenizer FILE]
// Loads the model (quantize, pack and JIT every kernel up front), prefills the prompt as
// one batch and streams the generated text to stdout; the stats go to stderr.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "model/dense_linear.h"
#include "model/generation.h"
#include "model/llama_executor.h"
#include "model/model_loader.h"

namespace qforge::cli {
namespace {

struct Options {
  std::string model;
  std::string prompt;
  int steps = 256;
  float temperature = 1.f;
  int top_k = 0;
  float top_p = 0.9f;
  long long seed = -1;
  std::string quant = "int8";
  std::string lm_head;
  int threads = 0;
  std::string max_isa;
  std::string tokenizer;
};

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

void run(const Options& o) {
  if (!o.max_isa.empty()) set_max_isa(parse_isa(o.max_isa, "--max-isa"));
  const Precision precision = parse_precision(o.quant, o.lm_head);
  const int threads = o.threads > 0 ? o.threads : std::max(1, cpu_info().cores);
  SamplerOptions sampling;
  sampling.temperature = o.temperature;
  sampling.top_k = o.top_k;
  sampling.top_p = o.top_p;
  sampling.seed =
      o.seed >= 0
          ? static_cast<std::uint64_t>(o.seed)
          : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  Sampler sampler(sampling);

  LoadedModel model = load_model(o.model, precision, o.tokenizer, threads);
  // f32 layers run on oneDNN's threads; the pool then only needs the caller.
  set_dense_threads(threads);
  ThreadPool pool(precision.quantized ? threads : 1);
  // The cache holds the prompt and what follows it, up to the model's context.
  const auto prompt_tokens =
      static_cast<long long>(model.tokenizer.encode(o.prompt, true, false).size());
  const auto positions = std::min<long long>(model.weights.config.seq_len, prompt_tokens + o.steps);
  LlamaExecutor executor(model.weights, pool, static_cast<int>(std::max(1LL, positions)));
  const LlamaConfig& c = model.weights.config;
  std::fprintf(stderr,
               "qforge run: %s (dim %d, %d layers, %d heads / %d kv, vocab %d), %s, %s kernels, "
               "%d threads\n"
               "load %.1f ms, pack %.1f ms, JIT %.1f ms (%zu kernels), weights %.1f KiB, "
               "KV cache %.1f KiB\n",
               o.model.c_str(), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size,
               to_string(precision).c_str(), std::string(isa_name(best_isa())).c_str(), threads,
               model.load_seconds * 1e3, model.pack_seconds * 1e3, model.jit_seconds * 1e3,
               model.kernels, static_cast<double>(model.weights.weight_bytes()) / 1024,
               static_cast<double>(executor.cache().bytes()) / 1024);

  const GenerationStats stats =
      generate(executor, model.tokenizer, sampler, o.prompt, o.steps, [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      });
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
  cmd->add_option("-m,--model", options->model, "Model file (GGUF or llama2.c .bin)")->required();
  cmd->add_option("-p,--prompt", options->prompt, "Prompt text (\"\": start from BOS only)");
  cmd->add_option("-n,--n-predict", options->steps, "Tokens to generate (default 256)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", options->temperature, "Sampling temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", options->top_k, "Keep the K most probable tokens; 0 = off (default)");
  cmd->add_option("--top-p", options->top_p, "Nucleus sampling threshold (default 0.9)");
  cmd->add_option("--seed", options->seed, "Random seed (default: time)");
  cmd->add_option("--quant", options->quant,
                  "f32 | int8 | int8-g<G>[-asym] | int4-g<G>[-asym] (default int8)");
  cmd->add_option("--lm-head", options->lm_head,
                  "Classifier precision with int8/int4: int8 (default) | f32");
  cmd->add_option("-t,--threads", options->threads, "Threads (default: physical cores)");
  cmd->add_option("--max-isa", options->max_isa, "Cap the kernel ISA: " + valid_isa_names());
  cmd->add_option("--tokenizer", options->tokenizer,
                  "llama2.c tokenizer.bin (default: tok<vocab>.bin or tokenizer.bin beside a "
                  ".bin model; the embedded vocabulary of a GGUF)");
  cmd->callback([options] { run(*options); });
}

}  // namespace qforge::cli
