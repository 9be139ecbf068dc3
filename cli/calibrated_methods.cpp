#include "cli/calibrated_methods.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "calib/awq_model.h"
#include "calib/calibrator.h"
#include "calib/gptq_model.h"
#include "calib/smoothquant.h"
#include "calib/static_activations.h"
#include "cli/progress_bar.h"
#include "cli/text_file.h"
#include "jit/base/error.h"

namespace qforge::cli {
namespace {

std::string format_ratio(double r) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", r);
  return text;
}

}  // namespace

void add_method_options(CLI::App* cmd, MethodOptions& o) {
  cmd->add_flag("--smoothquant", o.smoothquant,
                "SmoothQuant: move activation outliers into the weights, s = max|x|^a / "
                "max|w|^(1-a), folded into the norms, v and up (needs --calib or --calib-text)");
  cmd->add_option("--sq-alpha", o.sq_alpha,
                  "SmoothQuant's migration strength a in [0, 1] (default 0.5), or auto: per "
                  "layer from 0.3 .. 0.9 by the W8A8 output error on sampled rows "
                  "(--calib-text)");
  cmd->add_flag("--awq", o.awq,
                "AWQ: scale the weight columns of large activations before quantizing (folded "
                "into the norms, v and up), then a clipping search (needs --calib or "
                "--calib-text; before --gptq when both are given)");
  cmd->add_flag("!--no-awq-clip", o.awq_clip, "AWQ without the per-group clipping search");
  cmd->add_option("--awq-objective", o.awq_objective,
                  "What AWQ's alpha search minimises: layer (each layer's output error, from "
                  "its Gram matrix; the default) or block (the error of the block's output, "
                  "the block rerun per candidate; needs --calib-text)")
      ->check(CLI::IsMember({"layer", "block"}));
  cmd->add_option("--awq-block-chunks", o.awq_block_chunks,
                  "Calibration chunks the block objective reruns per candidate (default 2)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--gptq", o.gptq,
                "GPTQ: choose the linear layers' integers to keep their outputs on the "
                "calibration data (needs --calib or --calib-text; int8 / int4, any group)");
  cmd->add_option("--gptq-damp", o.gptq_damp,
                  "GPTQ damping, a fraction of the mean Hessian diagonal (default 0.01)")
      ->check(CLI::Range(0.0, 0.999));
  cmd->add_flag("--act-order", o.act_order,
                "GPTQ: quantize columns by decreasing Hessian diagonal (groups stay static, "
                "the packed layout keeps its order)");
  cmd->add_flag("--true-sequential", o.true_sequential,
                "GPTQ with --calib-text: inside each block too, each layer calibrated on the "
                "outputs of the block's layers already quantized (the block runs 5 times, not 2)");
  cmd->add_option("--calib", o.calib,
                  "Calibration file (qforge calibrate; --gram for GPTQ): one-shot, every "
                  "layer's statistics from the f32 model");
  cmd->add_option("--calib-text", o.calib_text,
                  "Calibration text: calibrate here, sequentially (each block on the outputs of "
                  "the blocks already quantized)");
  cmd->add_option("--calib-samples", o.calib_samples,
                  "Chunks of --calib-ctx tokens of --calib-text (default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--calib-ctx", o.calib_ctx,
                  "Tokens per calibration chunk, BOS first (default: 512 or the model's "
                  "context)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--act", o.act,
                  "int8 activations: dynamic (each token its own scale, also for a file that "
                  "stores static scales), static (W8A8 with one calibrated scale per layer "
                  "input, no max pass; needs --calib or --calib-text) or auto (static where "
                  "its rounding error on calibration rows is at most 3x per-token's, else "
                  "dynamic; --calib-text). Default: a file's stored scales, else dynamic");
}

ModelPreparer method_preparer(const MethodOptions& o, const Precision& precision, int threads,
                              bool quiet) {
  QF_REQUIRE(o.act.empty() || o.act == "dynamic" || o.act == "static" || o.act == "auto", "--act '",
             o.act, "': expected dynamic, static or auto");
  // Static scales stored in a file fit its inputs as they are: --act dynamic drops them,
  // and so does a method that rescales the inputs (SmoothQuant, AWQ).
  const bool drop_file_scales = o.act == "dynamic" || o.smoothquant || o.awq;
  if (!o.any()) {
    QF_REQUIRE(o.calib.empty() && o.calib_text.empty(),
               o.calib.empty() ? "--calib-text" : "--calib",
               ": no calibrated method asks for it (--smoothquant, --awq, --gptq, --act static)");
    if (drop_file_scales)
      return [](ModelFile& model, const Tokenizer&) { model.clear_activation_scales(); };
    return {};
  }
  QF_REQUIRE(!(o.smoothquant && o.awq),
             "--smoothquant and --awq: both rescale the linear inputs; give one of them");
  const bool weight_only = precision.quantized && precision.scheme.weight_only;
  QF_REQUIRE(!(weight_only && o.smoothquant), "--smoothquant with --quant ",
             to_string(precision.scheme),
             ": SmoothQuant moves activation outliers into the weights for int8 activations; a "
             "weight-only scheme keeps its activations in f32 (use --awq or --gptq)");
  QF_REQUIRE(!(weight_only && o.static_act()), "--act ", o.act, " with --quant ",
             to_string(precision.scheme),
             ": a weight-only scheme has no activation scales (its activations stay f32)");
  QF_REQUIRE(!o.true_sequential || !o.calib_text.empty(),
             "--true-sequential: only with --calib-text (a calibration file holds the f32 "
             "model's inputs)");
  QF_REQUIRE(o.calib.empty() != o.calib_text.empty(),
             o.calib.empty()
                 ? o.gptq || o.awq || o.smoothquant
                       ? std::string(o.gptq  ? "--gptq"
                                     : o.awq ? "--awq"
                                             : "--smoothquant") +
                             " needs --calib FILE (qforge calibrate --gram) or --calib-text FILE"
                   : o.act == "auto" ? std::string("--act auto needs --calib-text FILE")
                                     : std::string("--act static needs --calib FILE (qforge "
                                                   "calibrate) or --calib-text FILE")
                 : "--calib and --calib-text: give one of them");
  double sq_alpha = kSmoothQuantAuto;
  if (o.sq_alpha != "auto") {
    std::size_t used = 0;
    try {
      sq_alpha = std::stod(o.sq_alpha, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    QF_REQUIRE(used == o.sq_alpha.size() && sq_alpha >= 0 && sq_alpha <= 1, "--sq-alpha '",
               o.sq_alpha, "': expected a number in [0, 1] or auto");
  }
  QF_REQUIRE(!o.smoothquant || sq_alpha != kSmoothQuantAuto || o.calib.empty(),
             "--sq-alpha auto needs --calib-text: its search runs the layers on sampled "
             "activation rows, which a calibration file does not hold");
  GptqOptions options;
  options.damp = o.gptq_damp;
  options.act_order = o.act_order;
  AwqOptions awq;
  awq.clip = o.awq_clip;
  awq.objective = o.awq_objective == "block" ? AwqObjective::block : AwqObjective::layer;
  awq.block_chunks = o.awq_block_chunks;
  return [o, precision, threads, quiet, options, awq, sq_alpha, drop_file_scales](
             ModelFile& model, const Tokenizer& tokenizer) {
    if (drop_file_scales) model.clear_activation_scales();
    // (SmoothQuant or AWQ) then GPTQ; each reports on stderr unless quiet.
    std::unique_ptr<CalibrationFile> file;
    std::vector<std::vector<int>> chunks;
    std::string where;
    if (!o.calib.empty()) {
      file = std::make_unique<CalibrationFile>(CalibrationFile::open(o.calib));
      where = "the statistics of " + o.calib;
    } else {
      const int context = model.config().seq_len;
      const int ctx = o.calib_ctx > 0 ? o.calib_ctx : std::min(512, context);
      QF_REQUIRE(ctx <= context, "--calib-ctx ", ctx, " exceeds the context of ", model.path(),
                 " (", context, ")");
      const std::vector<int> tokens =
          tokenizer.encode(read_text_file(o.calib_text), tokenizer.adds_bos(), false);
      chunks =
          calibration_chunks(tokens, o.calib_samples, ctx, tokenizer.prompt_bos_id(), o.calib_text);
      where = std::to_string(chunks.size()) + " x " + std::to_string(ctx) + " tokens of " +
              o.calib_text;
    }
    SmoothQuantSummary sq;
    if (o.smoothquant) {
      ProgressBar bar("smoothquant", quiet);
      sq = apply_smoothquant(model, precision, SmoothQuantSource{file.get(), chunks}, sq_alpha,
                             threads,
                             [&bar](int done, int total) { bar.update(done, total, "blocks"); });
      bar.finish();
      if (!quiet) {
        std::fprintf(stderr,
                     "smoothquant: %d layers of %s, alpha %s, on %s: largest activation "
                     "outlier (max / median channel) %.1f -> %.1f; %.1f s\n",
                     sq.layers, to_string(precision).c_str(), o.sq_alpha.c_str(), where.c_str(),
                     sq.largest_outlier_before, sq.largest_outlier_after, sq.seconds);
        if (sq_alpha == kSmoothQuantAuto)
          for (const auto& [layer, alpha] : sq.alphas)
            std::fprintf(stderr, "  %s alpha %.1f\n", layer.c_str(), alpha);
      }
    }
    AwqSummary scaled;
    if (o.awq) {
      ProgressBar bar("awq", quiet);
      scaled = apply_awq(model, precision, AwqSource{file.get(), chunks}, awq, threads,
                         [&bar](int done, int total) { bar.update(done, total, "blocks"); });
      bar.finish();
      if (!quiet) {
        double lo = 1, hi = 0, sum = 0, gain = 0;
        for (const AwqLayer& l : scaled.layers) {
          lo = std::min(lo, l.alpha);
          hi = std::max(hi, l.alpha);
          sum += l.alpha;
          gain += l.rtn_error > 0 ? l.error / l.rtn_error : 1.0;
        }
        const double n = std::max<double>(1, static_cast<double>(scaled.layers.size()));
        std::fprintf(stderr,
                     "awq: %zu layers of %s on %s: alpha mean %.2f (%.2f .. %.2f), %s output "
                     "error %.2fx alpha 0's (round-to-nearest%s); %.1f s\n",
                     scaled.layers.size(), to_string(precision).c_str(), where.c_str(), sum / n, lo,
                     hi, o.awq_objective.c_str(), gain / n, o.awq_clip ? " with clipping" : "",
                     scaled.seconds);
      }
    }
    const auto* input_scales = o.awq           ? &scaled.input_scales
                               : o.smoothquant ? &sq.input_scales
                                               : nullptr;
    if (o.gptq) {
      GptqSource source;
      source.file = file.get();
      source.chunks = chunks;
      source.true_sequential = o.true_sequential;
      source.input_scales = input_scales;
      ProgressBar bar("gptq", quiet);
      const GptqSummary s =
          apply_gptq(model, precision, source, options, threads,
                     [&bar](int done, int total) { bar.update(done, total, "steps"); });
      bar.finish();
      if (!quiet)
        std::fprintf(
            stderr, "gptq: %d layers (%d tensors) of %s, %s on %s; %.1f s (GPTQ %.1f s)\n",
            s.layers, s.tensors, to_string(precision).c_str(),
            s.sequential ? (o.true_sequential ? "true-sequential" : "sequential") : "one-shot",
            where.c_str(), s.seconds, s.gptq_seconds);
    }
    if (!o.static_act()) return;
    ProgressBar bar("static act", quiet);
    const StaticActivationSummary s = apply_static_activations(
        model, precision,
        StaticActivationSource{file.get(), chunks, input_scales,
                               o.act == "auto" ? kStaticAutoFallback : 0.0},
        threads, [&bar](int done, int total) { bar.update(done, total, "blocks"); });
    bar.finish();
    if (quiet) return;
    int statics = 0;
    double lo = 0, hi = 0;
    std::string kept;
    for (const StaticLayer& l : s.layers) {
      if (!l.is_static) {
        kept += (kept.empty() ? "" : ", ") + l.name + " " + format_ratio(l.error_ratio);
        continue;
      }
      lo = statics == 0 ? l.error_ratio : std::min(lo, l.error_ratio);
      hi = statics == 0 ? l.error_ratio : std::max(hi, l.error_ratio);
      ++statics;
    }
    std::fprintf(stderr, "static activations: %d of %zu layers of %s on %s", statics,
                 s.layers.size(), to_string(precision).c_str(), where.c_str());
    if (hi > 0)
      std::fprintf(stderr, ", rounding error %s .. %s per-token's", format_ratio(lo).c_str(),
                   format_ratio(hi).c_str());
    std::fprintf(stderr, "; %.1f s\n", s.seconds);
    if (!kept.empty())
      std::fprintf(stderr, "  kept dynamic (rounding error > %.0fx per-token's): %s\n",
                   kStaticAutoFallback, kept.c_str());
  };
}

}  // namespace qforge::cli
