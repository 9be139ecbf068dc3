// qforge tune -m MODEL [--quant Q] [-t N] [--budget-seconds S] [--m 1,4,128] [--out FILE]
//             [--svg FILE] [--max-isa ISA]
// Finds the distinct kernels the model calls, times the blockings of each on this machine
// within the budget (ops/tune/tuner.h), and writes the tuning database that `run`,
// `bench` and `perplexity` then read. stderr: a progress bar (on a terminal); stdout:
// kernel | M | default | tuned | speed-up | fraction of read bandwidth (M <= 4) or of
// the dot-product peak (M > 4).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/progress_bar.h"
#include "cli/tune_chart.h"
#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "jit/tune/machine_limits.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"
#include "ops/tune/tuner.h"

namespace qforge::cli {
namespace {

struct Options {
  std::string model;
  std::string quant = "int8";
  int threads = 0;
  double budget_seconds = 60;
  std::vector<std::int64_t> ms = {1, 4, 128};
  std::string out;
  std::string svg;
  std::string max_isa;
};

// Below this budget the machine's limits are not measured (they take about a second).
constexpr double kLimitsMinBudget = 5;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void print_table(const TuneReport& report) {
  std::size_t width = 6;
  for (const TunedMeasurement& r : report.rows) width = std::max(width, kernel_name(r.key).size());
  std::printf("%-*s %5s %12s %12s %9s  %s\n", static_cast<int>(width), "kernel", "M", "default us",
              "tuned us", "speed-up", "of limit");
  for (const TunedMeasurement& r : report.rows) {
    std::string fraction = "-";
    if (r.fraction > 0)
      fraction = std::to_string(static_cast<int>(r.fraction * 100 + 0.5)) + "% " +
                 (r.memory_bound() ? "read bw" : "dot peak");
    std::printf("%-*s %5lld %12.1f %12.1f %8.2fx  %s%s\n", static_cast<int>(width),
                kernel_name(r.key).c_str(), static_cast<long long>(r.m), r.default_us, r.tuned_us,
                r.speedup(), fraction.c_str(), r.kept_default ? "  (default kept)" : "");
  }
}

// How calls are made: the thread split of large-M calls, the GEMV/GEMM and AMX points.
void print_policies(const TuneReport& report) {
  if (report.policies.empty()) return;
  std::printf(
      "\ncalls (median us per call; first = units split, GEMV or zmm GEMM; second = rows "
      "split, GEMM or AMX):\n");
  for (const CallPolicyMeasurement& p : report.policies) {
    std::printf("%s  ->  %s (noise %.1f%%)\n", kernel_name(p.key).c_str(), p.decision.c_str(),
                p.noise * 100);
    for (std::size_t i = 0; i < p.ms.size(); ++i)
      std::printf("    M %4lld  %10.1f  %10.1f\n", static_cast<long long>(p.ms[i]), p.first_us[i],
                  p.second_us[i]);
  }
}

void tune(const Options& o) {
  const auto start = Clock::now();
  if (!o.max_isa.empty()) set_max_isa(parse_isa(o.max_isa, "--max-isa"));
  QF_REQUIRE(o.budget_seconds > 0, "--budget-seconds must be positive");
  // Measure against the analytic defaults, not a table installed earlier in the process.
  clear_tuning();
  const Precision precision = parse_precision(o.quant);
  QF_REQUIRE(precision.quantized, "tune: --quant ", o.quant, " has no JIT kernels to tune");
  const int threads = o.threads > 0 ? o.threads : std::max(1, cpu_info().cores);
  const std::string out = o.out.empty() ? default_tuning_path().string() : o.out;

  std::vector<GemmKey> keys;
  {
    const ModelFile file = open_model(o.model);
    keys = build_llama_weights(file, precision, threads).warmup_keys();
  }
  std::fprintf(stderr, "qforge tune: %s, %s, %d threads, budget %.0f s, CPU %s\n", o.model.c_str(),
               to_string(precision).c_str(), threads, o.budget_seconds, cpu_signature().c_str());

  TunerOptions options;
  options.threads = threads;
  options.ms = o.ms;
  if (o.budget_seconds - seconds_since(start) >= kLimitsMinBudget) {
    // Past the caches, within what the tuner's own rotations span.
    const auto bytes = static_cast<std::size_t>(kTunerColdWeightsMaxBytes);
    options.limits.read_gbps = read_bandwidth_gbps(threads, bytes);
    options.limits.dot_gops = dot_peak_gops(threads, 5'000'000);
  }
  // What is left, less a moment to write the database and the report.
  options.budget_seconds = std::max(0.0, 0.98 * (o.budget_seconds - seconds_since(start)) - 0.1);
  ProgressBar bar("tune");
  if (ProgressBar::stderr_is_terminal())
    options.on_progress = [&bar](const TunerProgress& p) {
      bar.update(static_cast<long long>(p.task + 1), static_cast<long long>(p.tasks),
                 "kernels  " + p.kernel);
    };

  TuningDb db(cpu_signature());
  if (std::filesystem::exists(out)) {
    TuningDbLoad existing = load_tuning_db(out, cpu_signature());
    if (existing.db)
      db = std::move(*existing.db);
    else
      std::fprintf(stderr, "qforge tune: replacing %s\n", existing.error.c_str());
  }
  const TuneReport report = tune_kernels(keys, options, db);
  bar.finish();
  db.save(out);

  print_table(report);
  print_policies(report);
  for (const std::string& note : report.notes)
    std::fprintf(stderr, "qforge tune: %s\n", note.c_str());
  if (options.limits.read_gbps > 0)
    std::fprintf(stderr, "limits (%d threads): read %.1f GB/s, dot peak %.1f GOPS (%s)\n", threads,
                 options.limits.read_gbps, options.limits.dot_gops, dot_peak_instruction().c_str());
  if (!o.svg.empty()) {
    std::ofstream svg(o.svg);
    QF_REQUIRE(svg, o.svg, ": cannot write the chart");
    svg << roofline_svg(report, options.limits,
                        "qforge tune: " + o.model + ", " + std::to_string(threads) + " threads");
  }
  std::fprintf(stderr, "qforge tune: %zu of %zu kernels tuned in %.1f s; wrote %s (%zu entries)\n",
               report.tuned, report.tasks, seconds_since(start), out.c_str(), db.size());
}

}  // namespace

void register_tune(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd =
      app.add_subcommand("tune", "Measure the best kernel blockings for a model on this CPU");
  cmd->add_option("-m,--model", options->model, "Model file (GGUF or llama2.c .bin)")->required();
  cmd->add_option("--quant", options->quant,
                  "int8 | int8-g<G>[-asym] | int4-g<G>[-asym], or woq-<scheme> (weight-only "
                  "kernels) (default int8)");
  cmd->add_option("-t,--threads", options->threads, "Threads (default: physical cores)");
  cmd->add_option("--budget-seconds", options->budget_seconds,
                  "Time for the whole command (default 60)");
  cmd->add_option("--m", options->ms, "Rows to tune for, comma-separated (default 1,4,128)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--out", options->out,
                  "Database to write (default: $XDG_CACHE_HOME/qforge/tuning/<cpu>.json)");
  cmd->add_option("--svg", options->svg, "Also draw the measurements on a roofline (SVG)");
  cmd->add_option("--max-isa", options->max_isa, "Cap the kernel ISA: " + valid_isa_names());
  cmd->callback([options] { tune(*options); });
}

}  // namespace qforge::cli
