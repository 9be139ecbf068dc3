// qforge quant-report -m MODEL -f TEXT --quant Q [policy flags] [--ctx N] [--chunks N]
//                     [--json] [--svg FILE]
// Per linear layer: weight error, output error / SNR on the f32 inputs of the text,
// activation outliers and their int8 error, and the sensitivity (the logits' KLD with
// only that layer quantized); sorted by sensitivity (calib/quant_report.h). With a
// calibrated method (--gptq, --awq, --smoothquant, --act static), round-to-nearest's
// output error and KLD beside each layer's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/auto_policy.h"
#include "calib/input_scaling.h"
#include "calib/quant_report.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/output_file.h"
#include "cli/progress_bar.h"
#include "cli/sensitivity_chart.h"
#include "cli/text_file.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  std::string text;
  std::string svg;
  int ctx = 0;
  int chunks = 0;
  bool json = false;
  bool auto_policy = false;
  double target_kld = 0;
  std::uint64_t max_bytes = 0;
  std::string upgrade = "int8";
};

nlohmann::json to_json(const LayerQuantReport& l) {
  return {{"name", l.name},
          {"kind", l.kind},
          {"scheme", l.scheme},
          {"quantized_bytes", l.quantized_bytes},
          {"f32_bytes", l.f32_bytes},
          {"weight_rel_rms", l.weight_rel_rms},
          {"output_rel_rms", l.output_rel_rms},
          {"output_snr_db", std::isfinite(l.output_snr_db) ? nlohmann::json(l.output_snr_db)
                                                           : nlohmann::json(nullptr)},
          {"outlier_ratio", l.outlier_ratio},
          {"activation_rel_rms", l.activation_rel_rms},
          {"sensitivity_kld", l.sensitivity_kld},
          {"sensitivity_kld_stderr", l.sensitivity_kld_stderr}};
}

// The round-to-nearest report's layer of that name.
const LayerQuantReport& rtn_layer(const QuantReport& baseline, const std::string& name) {
  for (const LayerQuantReport& l : baseline.layers)
    if (l.name == name) return l;
  fail("quant-report: no round-to-nearest figures for ", name);
}

void quant_report(const Options& o) {
  const int threads = apply_model_options(o.model).threads;
  const Precision precision =
      model_precision(o.model, o.model.quant.empty() ? "int8" : o.model.quant);
  QF_REQUIRE(o.svg.empty() || o.svg != o.text, "--svg: would overwrite the text ", o.text);
  QF_REQUIRE(!o.auto_policy || (o.target_kld > 0) != (o.max_bytes > 0),
             "--auto-policy: give one of --target-kld and --max-bytes");
  QF_REQUIRE(o.auto_policy || (o.target_kld == 0 && o.max_bytes == 0),
             "--target-kld / --max-bytes: only with --auto-policy");
  QF_REQUIRE(!o.auto_policy || !(o.model.methods.smoothquant || o.model.methods.awq),
             "--auto-policy with --smoothquant / --awq: their folds change the norms the "
             "upgraded layers would read; choose the policy without them");
  const Precision upgrade_precision = model_precision(o.model, o.upgrade);
  QF_REQUIRE(!o.auto_policy || upgrade_precision.quantized, "--upgrade ", o.upgrade,
             ": the upgrade scheme must be a quantized scheme (int8, int8-g<G>, ...)");
  const std::string text = read_text_file(o.text);
  // With a calibrated method, the method's layers are measured against the f32 model of
  // the same folded weights (SmoothQuant / AWQ replace norms and weights: the same
  // function), and round-to-nearest's against the original, side by side.
  const bool methods = o.model.methods.any();
  std::map<std::string, std::vector<float>> folded;  // the method's replaced tensors
  auto quantized = open_model_session(o.model, precision, threads, 0, o.json, /*with_methods=*/true,
                                      [&folded](ModelFile& file, const Tokenizer&) {
                                        for (const TensorView& t : file.tensors())
                                          if (t.in_memory)
                                            folded[t.name] = tensor_f32(file, t.name);
                                      });
  auto f32 = open_model_session(o.model, parse_precision("f32"), threads, 0, o.json,
                                /*with_methods=*/false);
  std::unique_ptr<ModelSession> rtn, f32_folded;
  if (methods) {
    // Round-to-nearest with per-token activations, whatever scales the file stores.
    rtn = open_model_session(
        o.model, precision, threads, 0, o.json, /*with_methods=*/false,
        [](ModelFile& file, const Tokenizer&) { file.clear_activation_scales(); });
    if (!folded.empty())
      f32_folded =
          open_model_session(o.model, parse_precision("f32"), threads, 0, o.json,
                             /*with_methods=*/false, [&folded](ModelFile& file, const Tokenizer&) {
                               for (const auto& [name, values] : folded)
                                 file.replace_tensor(name, values);
                             });
  }
  ModelSession& method_reference = f32_folded ? *f32_folded : *f32;
  const LlamaConfig& c = f32->model.weights.config;
  const int ctx = o.ctx > 0 ? o.ctx : std::min(256, c.seq_len);
  QF_REQUIRE(ctx <= c.seq_len, "--ctx ", ctx, " exceeds the model's context of ", c.seq_len);
  const std::vector<int> tokens =
      f32->model.tokenizer.encode(text, f32->model.tokenizer.adds_bos(), false);
  QF_REQUIRE(tokens.size() >= static_cast<std::size_t>(ctx), o.text, ": ", tokens.size(),
             " tokens, fewer than one chunk of --ctx ", ctx);
  ProgressBar bar("quant-report", o.json);
  QuantReportOptions options;
  options.ctx = ctx;
  options.max_chunks = o.chunks;
  const int passes = methods ? 2 : 1;
  QuantReportOptions method_options = options;
  if (!folded.empty()) method_options.replaced = &folded;
  const QuantReport report = make_quant_report(
      method_reference, *quantized, tokens, method_options, threads,
      [&bar, passes](int done, int total) { bar.update(done, total * passes, "steps"); });
  std::optional<QuantReport> baseline;
  if (methods)
    baseline = make_quant_report(*f32, *rtn, tokens, options, threads, [&bar](int done, int total) {
      bar.update(total + done, 2 * total, "steps");
    });
  bar.finish();
  std::optional<AutoPolicy> chosen;
  if (o.auto_policy) {
    auto upgrade = open_model_session(o.model, upgrade_precision, threads, ctx, o.json,
                                      /*with_methods=*/false);
    const KldEvaluator kld(*f32->executor, tokens, ctx, report.chunks,
                           f32->model.tokenizer.prompt_bos_id());
    chosen = choose_auto_policy(report, *quantized, *upgrade, kld,
                                AutoPolicyGoal{o.target_kld, o.max_bytes});
  }

  std::vector<LayerQuantReport> sorted = report.layers;
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    return a.sensitivity_kld > b.sensitivity_kld;
  });
  if (!o.svg.empty())
    write_file_atomically(o.svg, sensitivity_svg(report, o.model.model + ", " + report.precision +
                                                             ": per-layer sensitivity"));
  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerQuantReport& l : sorted) {
      nlohmann::json layer = to_json(l);
      if (baseline) layer["rtn"] = to_json(rtn_layer(*baseline, l.name));
      layers.push_back(layer);
    }
    const nlohmann::json j = {{"model", o.model.model},
                              {"text", o.text},
                              {"precision", report.precision},
                              {"policy", report.policy},
                              {"ctx", report.ctx},
                              {"chunks", report.chunks},
                              {"scored_tokens", report.scored_tokens},
                              {"full_kld", report.full_kld},
                              {"full_kld_stderr", report.full_kld_stderr},
                              {"layers", layers}};
    nlohmann::json out = j;
    if (baseline) {
      out["rtn_policy"] = baseline->policy;
      out["rtn_full_kld"] = baseline->full_kld;
      out["rtn_full_kld_stderr"] = baseline->full_kld_stderr;
    }
    if (chosen)
      out["auto_policy"] = {{"quant", o.model.quant.empty() ? "int8" : o.model.quant},
                            {"upgrade", o.upgrade},
                            {"flags", chosen->flags},
                            {"upgraded", chosen->upgraded},
                            {"kld", chosen->kld},
                            {"kld_stderr", chosen->kld_stderr},
                            {"bytes", chosen->bytes},
                            {"base_bytes", chosen->base_bytes},
                            {"upgrade_bytes", chosen->upgrade_bytes},
                            {"met", chosen->met},
                            {"evaluations", chosen->evaluations}};
    std::printf("%s\n", out.dump().c_str());
    return;
  }
  std::printf("%s, %s: %d chunks of %d tokens of %s, %lld scored\npolicy: %s\n",
              o.model.model.c_str(), report.precision.c_str(), report.chunks, report.ctx,
              o.text.c_str(), static_cast<long long>(report.scored_tokens), report.policy.c_str());
  std::printf("%-18s %-15s %9s %9s %8s %8s %9s %11s %10s", "layer (by KLD)", "scheme", "w relRMS",
              "out relRMS", "SNR dB", "outliers", "act relRMS", "KLD alone", "+/-");
  if (baseline) std::printf(" | %9s %10s %11s", "RTN w", "RTN out", "RTN KLD");
  std::printf("\n");
  for (const LayerQuantReport& l : sorted) {
    std::printf("%-18s %-15s %9.5f %10.5f %8.2f %8.2f %10.5f %11.6f %10.6f", l.name.c_str(),
                l.scheme.c_str(), l.weight_rel_rms, l.output_rel_rms, l.output_snr_db,
                l.outlier_ratio, l.activation_rel_rms, l.sensitivity_kld, l.sensitivity_kld_stderr);
    if (baseline) {
      const LayerQuantReport& r = rtn_layer(*baseline, l.name);
      std::printf(" | %9.5f %10.5f %11.6f", r.weight_rel_rms, r.output_rel_rms, r.sensitivity_kld);
    }
    std::printf("\n");
  }
  double sum = 0;
  for (const LayerQuantReport& l : report.layers) sum += l.sensitivity_kld;
  std::printf("every layer quantized: mean KLD %.6f +/- %.6f (sum of the single-layer KLDs %.6f)\n",
              report.full_kld, report.full_kld_stderr, sum);
  if (baseline)
    std::printf("round-to-nearest (%s): mean KLD %.6f +/- %.6f\n", baseline->policy.c_str(),
                baseline->full_kld, baseline->full_kld_stderr);
  if (!chosen) return;
  const char* goal = o.target_kld > 0 ? "--target-kld" : "--max-bytes";
  std::printf(
      "auto-policy (%s %s, %zu of %zu layers upgraded to %s, %d models measured): %s\n"
      "  --quant %s %s\n"
      "  mean KLD %.6f +/- %.6f; linear layers %.2f MiB (uniform %s %.2f MiB, uniform %s "
      "%.2f MiB)\n",
      goal,
      o.target_kld > 0 ? std::to_string(o.target_kld).c_str() : std::to_string(o.max_bytes).c_str(),
      chosen->upgraded.size(), report.layers.size(), o.upgrade.c_str(), chosen->evaluations,
      chosen->met ? "met" : "NOT met (every candidate upgraded)",
      o.model.quant.empty() ? "int8" : o.model.quant.c_str(), chosen->flags.c_str(), chosen->kld,
      chosen->kld_stderr, chosen->bytes / 1048576.0, report.precision.c_str(),
      chosen->base_bytes / 1048576.0, o.upgrade.c_str(), chosen->upgrade_bytes / 1048576.0);
}

}  // namespace

void register_quant_report(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "quant-report",
      "Per-layer quantization error and sensitivity (KLD with one layer quantized)");
  add_model_options(cmd, options->model);
  cmd->add_option("-f,--file", options->text, "Text: the layer inputs and the KLD chunks")
      ->required();
  cmd->add_option("--ctx", options->ctx, "Tokens per chunk (default: min(256, context))")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunks", options->chunks, "Chunks of the text for the KLDs (default: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--svg", options->svg, "Also draw the sensitivities as a bar chart (SVG)");
  cmd->add_flag("--json", options->json, "One JSON object on stdout (layers sorted by KLD)");
  cmd->add_flag("--auto-policy", options->auto_policy,
                "Choose per-layer schemes: upgrade the layers that cost most KLD per byte "
                "saved to --upgrade until --target-kld is met or --max-bytes is full");
  cmd->add_option("--target-kld", options->target_kld, "With --auto-policy: the KLD to meet")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-bytes", options->max_bytes,
                  "With --auto-policy: the linear layers' byte budget")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--upgrade", options->upgrade,
                  "With --auto-policy: the scheme of upgraded layers (default int8)");
  cmd->callback([options] { quant_report(*options); });
}

}  // namespace qforge::cli
