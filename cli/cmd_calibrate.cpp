// qforge calibrate -m MODEL -f TEXT [--samples N] [--ctx T] [--gram] -o FILE [--json]
// Runs the model (f32 unless --quant says otherwise) over N chunks of T tokens of a text
// and writes every linear input's statistics (calib/calibration_file.h): per-channel
// absmax, mean |x|, mean x^2, and with --gram the input Gram matrix.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/calibration_file.h"
#include "calib/calibrator.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/progress_bar.h"
#include "cli/text_file.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  std::string text;
  std::string out;
  int samples = 16;
  int ctx = 512;
  bool gram = false;
  bool json = false;
};

void calibrate(const Options& o) {
  const int threads = apply_model_options(o.model).threads;
  const Precision precision =
      model_precision(o.model, o.model.quant.empty() ? "f32" : o.model.quant);
  const std::string text = read_text_file(o.text);
  auto session = open_model_session(o.model, precision, threads, o.ctx, o.json);
  const LlamaConfig& c = session->model.weights.config;
  QF_REQUIRE(o.ctx <= c.seq_len, "--ctx ", o.ctx, " exceeds the model's context of ", c.seq_len);
  const Tokenizer& tokenizer = session->model.tokenizer;
  const std::vector<int> tokens = tokenizer.encode(text, tokenizer.adds_bos(), /*add_eos=*/false);
  const auto chunks =
      calibration_chunks(tokens, o.samples, o.ctx, tokenizer.prompt_bos_id(), o.text);

  CalibrationSource source;
  source.model_file = std::filesystem::path(o.model.model).filename().string();
  source.text = o.text;
  source.samples = static_cast<int>(chunks.size());
  source.ctx = o.ctx;
  source.precision = to_string(precision);
  source.gram = o.gram;
  const std::uint64_t count = chunks.size() * static_cast<std::uint64_t>(o.ctx);
  CalibrationWriter writer(o.out, c, source, calibration_sites(c), count);
  // The widest outliers, for the summary.
  std::vector<std::pair<double, std::string>> outliers;
  ProgressBar bar("calibrating", o.json);
  const auto start = std::chrono::steady_clock::now();
  run_calibration(
      *session->executor, c, chunks, o.gram,
      [&](const SiteStatistics& s) {
        writer.add(s);
        outliers.emplace_back(s.outlier_ratio(), s.name);
      },
      [&bar](int done, int total) { bar.update(done, total, "blocks"); });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.commit();
  bar.finish();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double peak_rss = static_cast<double>(usage.ru_maxrss) * 1024.0;
  std::sort(outliers.rbegin(), outliers.rend());
  const nlohmann::json j = {{"model", o.model.model},
                            {"text", o.text},
                            {"out", o.out},
                            {"precision", to_string(precision)},
                            {"samples", chunks.size()},
                            {"ctx", o.ctx},
                            {"tokens", count},
                            {"gram", o.gram},
                            {"sites", outliers.size()},
                            {"seconds", seconds},
                            {"tokens_per_s", static_cast<double>(count) / seconds},
                            {"weight_bytes", session->model.weights.weight_bytes()},
                            {"peak_rss_bytes", peak_rss},
                            {"largest_outlier_ratio", outliers.front().first},
                            {"largest_outlier_site", outliers.front().second}};
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "%s: %zu sites of %s (%s) over %zu chunks of %d tokens of %s%s: %.1f s (%.1f tokens/s), "
      "peak RSS %.1f MiB (weights %.1f MiB)\n",
      o.out.c_str(), outliers.size(), o.model.model.c_str(), to_string(precision).c_str(),
      chunks.size(), o.ctx, o.text.c_str(), o.gram ? ", with Gram matrices" : "", seconds,
      static_cast<double>(count) / seconds, peak_rss / (1 << 20),
      static_cast<double>(session->model.weights.weight_bytes()) / (1 << 20));
  std::printf("largest activation outliers (max channel absmax / median):");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, outliers.size()); ++i)
    std::printf(" %s %.1f%s", outliers[i].second.c_str(), outliers[i].first, i < 4 ? "," : "");
  std::printf("\n");
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "calibrate", "Record every linear input's statistics over a text (calibration file)");
  add_model_options(cmd, options->model);
  cmd->add_option("-f,--file", options->text, "Calibration text")->required();
  cmd->add_option("-o,--out", options->out, "Calibration file to write")->required();
  cmd->add_option("--samples", options->samples, "Chunks of --ctx tokens (default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ctx", options->ctx, "Tokens per chunk, BOS first (default 512)")
      ->check(CLI::Range(2, 1 << 20));
  cmd->add_flag("--gram", options->gram,
                "Also record each input's Gram matrix X^T X / n (k x k doubles; what GPTQ needs)");
  cmd->add_flag("--json", options->json, "One JSON object on stdout");
  cmd->callback([options] { calibrate(*options); });
}

}  // namespace qforge::cli
