#include "capi/tuning_setup.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <system_error>

#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "jit/tune/tuning_db.h"
#include "ops/linear/quantized_linear.h"

namespace qforge {

TuningStatus install_tuning_file(const std::string& file, bool disabled, int threads) {
  clear_tuning();
  set_amx_min_rows(kDefaultAmxMinRows);
  TuningStatus status;
  if (disabled) return status;
  status.path = file.empty() ? default_tuning_path().string() : file;
  std::error_code ec;
  if (file.empty() && !std::filesystem::exists(status.path, ec)) return status;

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

}  // namespace qforge
