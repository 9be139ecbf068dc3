#include "cli/tuning_option.h"

#include "jit/tune/active_tuning.h"

namespace qforge::cli {

void add_tuning_options(CLI::App* command, TuningOptions& options) {
  auto* file = command->add_option("--tuning", options.file,
                                   "Tuning database (default: the one `qforge tune` wrote for "
                                   "this CPU, if any)");
  command->add_flag("--no-tuning", options.disabled, "Use the analytic default blockings only")
      ->excludes(file);
}

TuningStatus apply_tuning(const TuningOptions& options, int threads) {
  return install_tuning_file(options.file, options.disabled, threads);
}

std::string tuning_summary(const TuningStatus& status, std::span<const GemmKey> model_keys) {
  if (status.path.empty()) return "tuning: off (--no-tuning)";
  if (!status.active && !status.warning.empty()) return "tuning: none (database ignored)";
  if (!status.active) return "tuning: none for this CPU (" + status.path + ")";
  const TunedCount count = count_tuned(model_keys);
  return "tuning: " + std::to_string(count.tuned) + " of " + std::to_string(count.total) +
         " kernels tuned (" + status.path + ")";
}

}  // namespace qforge::cli
