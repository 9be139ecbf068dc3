// The options every command that loads a model shares (run, bench, perplexity, tune,
// dump-asm --model), registered once and applied once: the model and its precision, the
// threads, the ISA cap, the AMX mode and the tuning database.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "capi/capi_handles.h"
#include "cli/calibrated_methods.h"
#include "cli/tuning_option.h"
#include "model/runtime/model_session.h"

namespace qforge::cli {

struct ModelOptions {
  std::string model;
  std::string quant;  // "" = the model's default (native for quantized GGUF, else int8)
  std::string lm_head;
  std::string preset;                     // --preset: named rules, before the flags below
  std::vector<std::string> tensor_types;  // --tensor-type PATTERN=SCHEME, in order
  std::vector<std::string> keeps;         // --keep PATTERN[=f32|bf16], in order
  std::string kv;                         // --kv f32 | bf16 | int8 ("" = f32)
  int threads = 0;
  std::string max_isa;
  std::string tokenizer;
  std::string amx;
  std::string woq_math;  // --woq-math auto | f32 | bf16 ("" = $QFORGE_WOQ_MATH or auto)
  TuningOptions tuning;
  MethodOptions methods;  // --gptq, --calib, ... (with --quant)
};

// Adds -m, --quant and the calibrated methods' flags (unless `with_quant` is false),
// --lm-head, --preset, --tensor-type, --keep, --kv, -t, --max-isa, --tokenizer, --amx,
// --woq-math, --tuning and --no-tuning.
void add_model_options(CLI::App* cmd, ModelOptions& options, bool with_quant = true);

// The precision of `quant` (default: --quant) with --lm-head and the policy rules:
// --preset's, then every --keep, then every --tensor-type (each in the order given; the last
// match decides, so `--keep '*' --tensor-type blk.3.ffn_down=int8` quantizes one layer). Throws
// qforge::Error naming the flag at fault.
Precision model_precision(const ModelOptions& options);
// The rules of --preset, --keep and --tensor-type in that order.
std::vector<TensorRule> policy_rules(const std::string& preset,
                                     const std::vector<std::string>& keeps,
                                     const std::vector<std::string>& tensor_types);
Precision model_precision(const ModelOptions& options, std::string_view quant);

struct AppliedModelOptions {
  int threads = 1;  // -t, else the physical cores
  TuningStatus tuning;
};

// Applies --max-isa, --amx, --woq-math and the tuning database (before any model is loaded).
AppliedModelOptions apply_model_options(const ModelOptions& options);

// Opens the model, applying the calibrated methods asked for (unless `with_methods` is
// false: a reference such as the f32 model beside a quantized one), with a progress bar
// on stderr while it loads (terminals only; none when `quiet`).
// `after` (if given) runs on the prepared file last, before the weights are built.
std::unique_ptr<ModelSession> open_model_session(const ModelOptions& options,
                                                 const Precision& precision, int threads,
                                                 int positions = 0, bool quiet = false,
                                                 bool with_methods = true,
                                                 const ModelPreparer& after = {});

// The same through the C API (include/qforge.h): the options become qf_model_params
// (--max-isa, --amx, --woq-math and the tuning are applied by apply_model_options, not
// again here); the calibrated methods run on the file as it opens.
std::unique_ptr<qf_model> open_model_handle(const ModelOptions& options, int threads,
                                            bool quiet = false);

}  // namespace qforge::cli
