#include "cli/model_options.h"

#include <algorithm>

#include "cli/amx_mode.h"
#include "cli/progress_bar.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "model/runtime/kv_cache.h"
#include "ops/linear/quantized_linear.h"

namespace qforge::cli {

void add_model_options(CLI::App* cmd, ModelOptions& o, bool with_quant) {
  cmd->add_option("-m,--model", o.model, "Model file (GGUF or llama2.c .bin)")->required();
  if (with_quant)
    cmd->add_option("--quant", o.quant,
                    "f32 | bf16 | int8 | int8-g<G>[-asym] | int4-g<G>[-asym] | native; "
                    "woq-<scheme> (woq-int8, woq-int4-g128..., woq-native) for weight-only: the "
                    "same weights, f32 activations (default: native for a quantized GGUF, else "
                    "int8)");
  if (with_quant) add_method_options(cmd, o.methods);
  cmd->add_option("--lm-head", o.lm_head,
                  "Classifier precision with int8/int4: int8 (default) | bf16 | f32; a native "
                  "run keeps the file's Q8_0/Q4_0/Q4_1 classifier unless int8 is given");
  cmd->add_option("--preset", o.preset,
                  "Policy preset: " + preset_names() +
                      " (keep-ends: embedding and classifier f32; norms are always f32)");
  cmd->add_option("--keep", o.keeps,
                  "PATTERN[=f32|bf16]: keep the matching tensors dense (GGUF names without "
                  ".weight, * and ? globs: 'output', 'blk.0.*'); repeatable");
  cmd->add_option("--tensor-type", o.tensor_types,
                  "PATTERN=SCHEME: the matching tensors get SCHEME (int8, int4-g32, f32, bf16, "
                  "native, ...); applied after --keep, the last match wins; repeatable");
  cmd->add_option("--kv", o.kv,
                  "KV cache type: f32 (default) | bf16 | int8 (KIVI: keys with a scale per "
                  "channel and 32 positions, values per position, the newest 32 positions "
                  "exact; about 0.28x f32's bytes)");
  cmd->add_option("-t,--threads", o.threads, "Threads (default: physical cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-isa", o.max_isa, "Cap the kernel ISA: " + valid_isa_names());
  cmd->add_option("--tokenizer", o.tokenizer,
                  "llama2.c tokenizer.bin (default: tok<vocab>.bin or tokenizer.bin beside a "
                  ".bin model; the embedded vocabulary of a GGUF)");
  cmd->add_option("--amx", o.amx,
                  "off | emulate: AMX kernels through the instruction emulator on a CPU "
                  "without AMX (default: $QFORGE_AMX)");
  cmd->add_option("--woq-math", o.woq_math,
                  "auto | f32 | bf16: how weight-only layers multiply (auto: int4 on zmm "
                  "with vdpbf16ps on bf16 activations where the CPU has AVX512-BF16, else f32 "
                  "FMA, and decode rows on a VNNI ISA split into s8 digit rows for the integer "
                  "kernels; f32: f32 FMA only; bf16: vdpbf16ps also under the emulator, no "
                  "split; default: $QFORGE_WOQ_MATH or auto)");
  add_tuning_options(cmd, o.tuning);
}

Precision model_precision(const ModelOptions& o) {
  return model_precision(o, o.quant);
}

Precision model_precision(const ModelOptions& o, std::string_view quant) {
  Precision precision = parse_precision(quant, o.lm_head);
  if (!o.kv.empty()) precision.kv = parse_kv_type(o.kv, "--kv");
  precision.rules = policy_rules(o.preset, o.keeps, o.tensor_types);
  return precision;
}

std::vector<TensorRule> policy_rules(const std::string& preset,
                                     const std::vector<std::string>& keeps,
                                     const std::vector<std::string>& tensor_types) {
  std::vector<TensorRule> rules;
  if (!preset.empty()) rules = preset_rules(preset);
  for (const std::string& keep : keeps) rules.push_back(parse_keep_rule(keep));
  for (const std::string& type : tensor_types) rules.push_back(parse_tensor_type_rule(type));
  return rules;
}

AppliedModelOptions apply_model_options(const ModelOptions& o) {
  if (!o.max_isa.empty()) set_max_isa(parse_isa(o.max_isa, "--max-isa"));
  apply_amx_mode(o.amx);
  if (!o.woq_math.empty()) set_weight_only_math(parse_weight_only_math(o.woq_math, "--woq-math"));
  AppliedModelOptions applied;
  applied.threads = o.threads > 0 ? o.threads : std::max(1, cpu_info().cores);
  applied.tuning = apply_tuning(o.tuning, applied.threads);
  return applied;
}

}  // namespace qforge::cli

namespace qforge::cli {

std::unique_ptr<ModelSession> open_model_session(const ModelOptions& o, const Precision& precision,
                                                 int threads, int positions, bool quiet,
                                                 bool with_methods, const ModelPreparer& after) {
  ProgressBar bar("loading " + to_string(precision), quiet);
  const ModelPreparer methods =
      with_methods ? method_preparer(o.methods, precision, threads, quiet) : ModelPreparer{};
  ModelPreparer prepare = methods;
  if (after)
    prepare = [&methods, &after](ModelFile& file, const Tokenizer& tokenizer) {
      if (methods) methods(file, tokenizer);
      after(file, tokenizer);
    };
  auto session = open_session(
      o.model, precision, threads, positions, o.tokenizer,
      [&bar](int done, int total) { bar.update(done, total, "layers"); }, prepare);
  bar.finish();
  return session;
}

}  // namespace qforge::cli

namespace qforge::cli {

std::unique_ptr<qf_model> open_model_handle(const ModelOptions& o, int threads, bool quiet) {
  const Precision precision = model_precision(o);
  ProgressBar bar("loading " + to_string(precision), quiet);
  const auto c_strings = [](const std::vector<std::string>& items) {
    std::vector<const char*> out;
    for (const std::string& item : items) out.push_back(item.c_str());
    return out;
  };
  const std::vector<const char*> keeps = c_strings(o.keeps);
  const std::vector<const char*> tensor_types = c_strings(o.tensor_types);
  qf_model_params params = qf_model_default_params();
  params.quant = o.quant.c_str();
  params.lm_head = o.lm_head.c_str();
  params.kv = o.kv.c_str();
  params.preset = o.preset.c_str();
  params.keep = keeps.data();
  params.n_keep = static_cast<int>(keeps.size());
  params.tensor_types = tensor_types.data();
  params.n_tensor_types = static_cast<int>(tensor_types.size());
  params.tokenizer = o.tokenizer.c_str();
  params.threads = threads;
  params.progress = [](int done, int total, void* user) {
    static_cast<ProgressBar*>(user)->update(done, total, "layers");
  };
  params.progress_user = &bar;
  auto model =
      capi::load_model(o.model, params, method_preparer(o.methods, precision, threads, quiet));
  bar.finish();
  return model;
}

}  // namespace qforge::cli
