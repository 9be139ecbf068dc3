// The tuning options every command that runs a model shares:
//
//   --tuning FILE   read this database instead of the default one for this CPU
//   --no-tuning     analytic default blockings only
//
// apply_tuning() installs the database for the run's thread count (capi/tuning_setup.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <span>
#include <string>

#include "capi/tuning_setup.h"
#include "jit/gemm/gemm_key.h"

namespace qforge::cli {

struct TuningOptions {
  std::string file;
  bool disabled = false;
};

void add_tuning_options(CLI::App* command, TuningOptions& options);

using qforge::TuningStatus;

// Call before the model is loaded (kernels are generated at load time).
TuningStatus apply_tuning(const TuningOptions& options, int threads);

// "tuning: 9 of 12 kernels tuned (<path>)", "tuning: off (--no-tuning)",
// "tuning: none for this CPU (<path>)" ... for the model's kernel keys.
std::string tuning_summary(const TuningStatus& status, std::span<const GemmKey> model_keys);

}  // namespace qforge::cli
