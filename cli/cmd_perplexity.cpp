// qforge perplexity -m MODEL -f TEXT [--ctx N] [--ubatch N] [--quant Q] [--json] [--no-kld]
//                   [--base F32]
// Perplexity of the text as llama-perplexity computes it (model/perplexity.h); for a
// quantized or bf16 run also the KL divergence from the f32 model and top-1 agreement,
// both models evaluated in the same process on the same chunks. The f32 model is MODEL
// run in f32, or --base: the model a quantized file was made from (a quantized file's own
// f32 run holds its quantized weights), as llama-perplexity's --kl-divergence-base.
// --ubatch N runs the evaluated model's chunks N tokens a forward call through the KV cache
// (--ubatch 1: every token on the decode path, one-row kernels; the reference stays one
// call a chunk), so the decode kernels' quality is measured too.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/progress_bar.h"
#include "cli/text_file.h"
#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "model/runtime/model_session.h"
#include "model/runtime/perplexity.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  std::string text;
  int ctx = 0;
  int ubatch = 0;  // tokens per forward call of the evaluated model (0: the whole chunk)
  bool json = false;
  bool no_kld = false;
  std::string base;  // the f32 reference model, when not MODEL itself
};

// A chunk's logits in one forward call, or in calls of `ubatch` tokens each, the later
// ones attending to the earlier ones' cache rows:
//
//   chunk [t_0 .. t_{ubatch-1}][t_ubatch .. ]...[.. t_{ctx-1}]   forward(part, start)
//   logits rows                 copied in order                   ctx x vocab
ChunkLogits logits_of(LlamaExecutor& executor, int vocab, int ubatch = 0) {
  auto rows = std::make_shared<std::vector<float>>();
  return [&executor, vocab, ubatch, rows](std::span<const int> chunk) -> std::span<const float> {
    if (ubatch <= 0 || std::size_t(ubatch) >= chunk.size())
      return executor.forward(chunk, 0, /*all_logits=*/true);
    rows->resize(chunk.size() * std::size_t(vocab));
    for (std::size_t start = 0; start < chunk.size(); start += std::size_t(ubatch)) {
      const std::size_t count = std::min(std::size_t(ubatch), chunk.size() - start);
      const std::span<const float> part =
          executor.forward(chunk.subspan(start, count), int(start), /*all_logits=*/true);
      QF_REQUIRE(part.size() == count * std::size_t(vocab), "perplexity: the model returned ",
                 part.size(), " logits for ", count, " tokens");
      std::copy(part.begin(), part.end(), rows->begin() + std::ptrdiff_t(start * vocab));
    }
    return *rows;
  };
}

void perplexity(const Options& o) {
  const int threads = apply_model_options(o.model).threads;
  const Precision precision = model_precision(o.model);
  const std::string text = read_text_file(o.text);
  auto session = open_model_session(o.model, precision, threads, 0, o.json);
  const LlamaConfig& c = session->model.weights.config;
  const int ctx = o.ctx > 0 ? o.ctx : std::min(512, c.seq_len);
  QF_REQUIRE(ctx <= c.seq_len, "--ctx ", ctx, " exceeds the model's context of ", c.seq_len);
  const Tokenizer& tokenizer = session->model.tokenizer;
  const std::vector<int> tokens = tokenizer.encode(text, tokenizer.adds_bos(), /*add_eos=*/false);

  // The f32 model, for the divergence of a quantized (or bf16) run.
  QF_REQUIRE(o.base.empty() || !o.no_kld, "--base gives the reference --no-kld skips");
  const bool reference_needed =
      !o.no_kld && (!o.base.empty() || precision.quantized || precision.dense != DenseType::f32 ||
                    !precision.rules.empty() || precision.kv != KvType::f32);
  std::unique_ptr<ModelSession> reference;
  if (reference_needed) {
    ModelOptions base = o.model;
    if (!o.base.empty()) base.model = o.base;
    reference = open_model_session(base, parse_precision("f32"), threads, 0, o.json,
                                   /*with_methods=*/false);
    const LlamaConfig& b = reference->model.weights.config;
    QF_REQUIRE(o.base.empty() ||
                   (b.vocab_size == c.vocab_size && b.dim == c.dim && b.n_layers == c.n_layers),
               "--base ", o.base, " (", b.to_string(), ") is not the model of ", o.model.model,
               " (", c.to_string(), ")");
    QF_REQUIRE(o.base.empty() ||
                   reference->model.tokenizer.encode(text, tokenizer.adds_bos(), false) == tokens,
               "--base ", o.base, ": its tokenizer splits ", o.text, " differently from ",
               o.model.model, "'s");
  }

  ProgressBar bar("perplexity", o.json);
  const PerplexityResult r =
      evaluate_perplexity(tokens, ctx, c.vocab_size, tokenizer.prompt_bos_id(),
                          logits_of(*session->executor, c.vocab_size, o.ubatch),
                          reference ? logits_of(*reference->executor, c.vocab_size) : ChunkLogits{},
                          [&bar](int done, int total) { bar.update(done, total, "chunks"); });
  bar.finish();

  if (o.json) {
    nlohmann::json j = {{"model", o.model.model},
                        {"text", o.text},
                        {"quant", to_string(precision)},
                        {"policy", policy_summary(session->model.weights)},
                        {"isa", std::string(isa_name(best_isa()))},
                        {"ctx", ctx},
                        {"ubatch", o.ubatch > 0 ? std::min(o.ubatch, ctx) : ctx},
                        {"chunks", r.chunks},
                        {"scored_tokens", r.scored_tokens},
                        {"mean_nll", r.mean_nll},
                        {"nll_stderr", r.nll_stderr},
                        {"perplexity", r.perplexity},
                        {"perplexity_stderr", r.perplexity_stderr}};
    if (r.has_reference) {
      j["f32_perplexity"] = r.reference_perplexity;
      j["perplexity_change"] = r.perplexity / r.reference_perplexity - 1.0;
      j["mean_kld"] = r.mean_kld;
      j["kld_stderr"] = r.kld_stderr;
      j["top1_agreement"] = r.top1_agreement;
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s, %s: %zu tokens, %d chunks of %d, %lld scored", o.model.model.c_str(),
              to_string(precision).c_str(), tokens.size(), r.chunks, ctx,
              static_cast<long long>(r.scored_tokens));
  if (o.ubatch > 0 && o.ubatch < ctx) std::printf(", %d tokens a forward call", o.ubatch);
  std::printf("\n");
  std::printf("policy: %s\n", policy_summary(session->model.weights).c_str());
  std::printf("Final estimate: PPL = %.4f +/- %.4f   (mean NLL %.5f +/- %.5f)\n", r.perplexity,
              r.perplexity_stderr, r.mean_nll, r.nll_stderr);
  if (r.has_reference) {
    std::printf("f32 PPL          = %.4f   (change %+.3f %%)\n", r.reference_perplexity,
                100.0 * (r.perplexity / r.reference_perplexity - 1.0));
    std::printf("Mean KLD         = %.6f +/- %.6f\n", r.mean_kld, r.kld_stderr);
    std::printf("Same top-1       = %.3f %%\n", 100.0 * r.top1_agreement);
  }
}

}  // namespace

void register_perplexity(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("perplexity", "Perplexity of a text; KL divergence from f32");
  add_model_options(cmd, options->model);
  cmd->add_option("-f,--file", options->text, "Text file to evaluate")->required();
  cmd->add_option("--ctx", options->ctx, "Tokens per chunk (default: min(512, context))")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--ubatch", options->ubatch,
                  "Tokens per forward call of the evaluated model (default: the whole chunk; "
                  "1: every token on the decode path)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", options->json, "One JSON object on stdout");
  cmd->add_flag("--no-kld", options->no_kld, "Skip the f32 reference (no KLD / top-1)");
  cmd->add_option("--base", options->base,
                  "The f32 reference model for KLD / top-1 (default: MODEL run in f32); for a "
                  "quantized file, the model it was made from");
  cmd->callback([options] { perplexity(*options); });
}

}  // namespace qforge::cli
