// The tuning options every command that runs a model shares:
//
//   --tuning FILE   read this database instead of the default one for this CPU
//   --no-tuning     analytic default blockings only
//
// apply_tuning() loads the database (default: $XDG_CACHE_HOME/qforge/tuning/<signature>.json)
// and installs it for the run's thread count. A missing default database is silent; an
// unreadable, foreign (another CPU signature), old (another format or generator version)
// or corrupt one is ignored with one warning line on stderr. Tuning changes which kernel
// blocking runs, never the results.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <span>
#include <string>

#include "jit/gemm/gemm_key.h"

namespace qforge::cli {

struct TuningOptions {
  std::string file;
  bool disabled = false;
};

void add_tuning_options(CLI::App* command, TuningOptions& options);

struct TuningStatus {
  bool active = false;      // a database is installed
  std::string path;         // the database read or looked for ("" with --no-tuning)
  std::size_t entries = 0;  // entries in it (all thread counts)
  std::string warning;      // the line printed on stderr, if one was
  int amx_min_m = 0;        // the AMX row threshold the database set (0: the default)
};

// Call before the model is loaded (kernels are generated at load time).
TuningStatus apply_tuning(const TuningOptions& options, int threads);

// "tuning: 9 of 12 kernels tuned (<path>)", "tuning: off (--no-tuning)",
// "tuning: none for this CPU (<path>)" ... for the model's kernel keys.
std::string tuning_summary(const TuningStatus& status, std::span<const GemmKey> model_keys);

}  // namespace qforge::cli
