#include "cli/tuning_option.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "jit/tune/tuning_db.h"
#include "ops/linear/quantized_linear.h"

namespace qforge::cli {

void add_tuning_options(CLI::App* command, TuningOptions& options) {
  auto* file = command->add_option("--tuning", options.file,
                                   "Tuning database (default: the one `qforge tune` wrote for "
                                   "this CPU, if any)");
  command->add_flag("--no-tuning", options.disabled, "Use the analytic default blockings only")
      ->excludes(file);
}

TuningStatus apply_tuning(const TuningOptions& options, int threads) {
  clear_tuning();
  set_amx_min_rows(kDefaultAmxMinRows);
  TuningStatus status;
  if (options.disabled) return status;
  status.path = options.file.empty() ? default_tuning_path().string() : options.file;
  std::error_code ec;
  if (options.file.empty() && !std::filesystem::exists(status.path, ec)) return status;

  TuningDbLoad loaded = load_tuning_db(status.path, cpu_signature());
  if (!loaded.db) {
    status.warning = "qforge: warning: ignoring the tuning database: " + loaded.error;
  } else {
    if (!loaded.warnings.empty())
      status.warning = "qforge: warning: " + std::to_string(loaded.warnings.size()) +
                       " tuning entries ignored; first: " + loaded.warnings.front();
    status.entries = loaded.db->size();
    status.active = true;
    // The AMX threshold is one number per process: the largest M any tuned shape needed
    // before AMX beat zmm, so AMX runs only where it won for every shape measured.
    std::optional<int> amx_min_m;
    for (const auto& [key, tuned] : loaded.db->entries())
      if (key.threads == threads && tuned.amx_min_m)
        amx_min_m = std::max(amx_min_m.value_or(1), *tuned.amx_min_m);
    if (amx_min_m) {
      set_amx_min_rows(*amx_min_m);
      status.amx_min_m = *amx_min_m;
    }
    install_tuning(std::move(*loaded.db), threads);
  }
  if (!status.warning.empty()) std::fprintf(stderr, "%s\n", status.warning.c_str());
  return status;
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
