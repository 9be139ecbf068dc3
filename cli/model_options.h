// The options every command that loads a model shares (run, bench, perplexity, tune,
// dump-asm --model), registered once and applied once: the model and its precision, the
// threads, the ISA cap, the AMX mode and the tuning database.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cli/tuning_option.h"
#include "model/model_session.h"

namespace qforge::cli {

struct ModelOptions {
  std::string model;
  std::string quant;  // "" = the model's default (native for quantized GGUF, else int8)
  std::string lm_head;
  int threads = 0;
  std::string max_isa;
  std::string tokenizer;
  std::string amx;
  TuningOptions tuning;
};

// Adds -m, --quant (unless `with_quant` is false), --lm-head, -t, --max-isa, --tokenizer,
// --amx, --tuning and --no-tuning.
void add_model_options(CLI::App* cmd, ModelOptions& options, bool with_quant = true);

struct AppliedModelOptions {
  int threads = 1;  // -t, else the physical cores
  TuningStatus tuning;
};

// Applies --max-isa, --amx and the tuning database (before any model is loaded).
AppliedModelOptions apply_model_options(const ModelOptions& options);

// Opens the model with a progress bar on stderr while it loads (terminals only; none
// when `quiet`).
std::unique_ptr<ModelSession> open_model_session(const ModelOptions& options,
                                                 const Precision& precision, int threads,
                                                 int positions = 0, bool quiet = false);

}  // namespace qforge::cli
