// qforge quantize -m MODEL [--quant Q] [-t N] [--json]: quantizes and packs every linear
// layer of a model the way `run` would at load time, and reports sizes, packing speed and
// the quantization error per tensor (relative RMS of dequantized vs original weights).
// With -o OUT.gguf [--tensor-type P=S] [--keep P] [--preset NAME]: writes the quantized
// model as a GGUF file that `run` loads without quantizing again (model/quantized_gguf.h).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/progress_bar.h"
#include "jit/base/parallel_for.h"
#include "model/format/model_file.h"
#include "model/runtime/quantized_gguf.h"
#include "ops/quant/pack.h"

namespace qforge::cli {
namespace {

struct Options {
  std::string model;
  std::string quant = "int8";
  int threads = 0;
  bool json = false;
  std::string out;
  std::string tokenizer;  // llama2.c: its tokenizer.bin (default: found beside the model)
  std::string preset;
  std::vector<std::string> keeps, tensor_types;
  MethodOptions methods;  // with -o: --gptq, --calib, ...
};

void write_file(const Options& o) {
  Precision precision = parse_precision(o.quant);
  precision.rules = policy_rules(o.preset, o.keeps, o.tensor_types);
  ModelFile model = open_model(o.model);
  const ModelPreparer prepare = method_preparer(
      o.methods, precision, o.threads > 0 ? o.threads : default_load_threads(), o.json);
  // The tokenizer where calibration or a llama2.c checkpoint's metadata needs it.
  std::optional<Tokenizer> loaded;
  if (prepare || model.gguf() == nullptr || !o.tokenizer.empty())
    loaded = load_model_tokenizer(model, o.tokenizer);
  const Tokenizer* tokenizer = loaded ? &*loaded : nullptr;
  require_quantized_gguf_source(model, precision, tokenizer);  // before any calibration
  if (prepare) prepare(model, *tokenizer);
  ProgressBar bar("writing " + o.out, o.json);
  const auto start = std::chrono::steady_clock::now();
  const QuantizedFile file = write_quantized_gguf(
      model, precision, o.out,
      [&bar](std::size_t done, std::size_t total) { bar.update(done, total, "tensors"); },
      tokenizer);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bar.finish();
  std::map<std::string, int> choices;
  for (const QuantizedFileTensor& t : file.tensors)
    ++choices[t.choice + " (" + std::string(ggml_type_name(t.type)) + ")"];
  if (o.json) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const QuantizedFileTensor& t : file.tensors)
      tensors.push_back({{"name", t.name},
                         {"type", std::string(ggml_type_name(t.type))},
                         {"choice", t.choice},
                         {"source_bytes", t.source_bytes},
                         {"bytes", t.bytes}});
    const nlohmann::json j = {{"model", o.model},
                              {"out", o.out},
                              {"quant", o.quant},
                              {"rules", rules_as_flags(precision.rules)},
                              {"source_bytes", file.source_bytes},
                              {"bytes", file.bytes},
                              {"seconds", seconds},
                              {"source_gb_per_s", file.source_bytes / seconds / 1e9},
                              {"static_activation_scales", model.activation_scales().size()},
                              {"tensors", tensors}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("%s: %zu tensors, %.1f MiB -> %.1f MiB in %.2f s (%.2f GB/s of source weights)\n",
              o.out.c_str(), file.tensors.size(), file.source_bytes / 1048576.0,
              file.bytes / 1048576.0, seconds, file.source_bytes / seconds / 1e9);
  for (const auto& [choice, count] : choices) std::printf("  %4d x %s\n", count, choice.c_str());
  if (model.has_activation_scales())
    std::printf("  static activation scales of %zu layers (qforge.activation_scale.*)\n",
                model.activation_scales().size());
}

bool is_linear(const std::string& name) {
  for (const char* role :
       {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    if (name.find(std::string(".") + role + ".") != std::string::npos) return true;
  return name == "output.weight";
}

// Relative RMS error of the dequantized weights.
double relative_rms_error(const std::vector<float>& w, const PackedWeights& packed) {
  const std::vector<float> back = dequantize(unpack_weights(packed));
  double error = 0, energy = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    error += double(w[i] - back[i]) * (w[i] - back[i]);
    energy += double(w[i]) * w[i];
  }
  return energy > 0 ? std::sqrt(error / energy) : 0.0;
}

void run(const Options& o) {
  if (!o.out.empty()) return write_file(o);
  QF_REQUIRE(o.preset.empty() && o.keeps.empty() && o.tensor_types.empty() && o.tokenizer.empty() &&
                 !o.methods.any(),
             "quantize: --preset, --keep, --tensor-type, --tokenizer and --gptq apply with -o");
  const QuantScheme scheme = parse_quant_scheme(o.quant, "--quant");
  const ModelFile model = open_model(o.model);
  const int threads = o.threads > 0 ? o.threads : default_load_threads();
  nlohmann::json tensors = nlohmann::json::array();
  double source_bytes = 0, packed_bytes = 0, pack_seconds = 0, worst_error = 0;
  if (!o.json)
    std::printf("%-28s %-12s %10s %10s %9s\n", "tensor", "shape", "f32 KiB", "packed KiB",
                "rel. RMS");
  for (const TensorView& t : model.tensors()) {
    if (!is_linear(t.name)) continue;
    std::vector<float> w(static_cast<std::size_t>(t.rows * t.columns));
    for (std::int64_t r = 0; r < t.rows; ++r)
      t.row_to_f32(r, std::span<float>(w.data() + r * t.columns, t.columns));
    const auto start = std::chrono::steady_clock::now();
    const PackedWeights packed = pack_weights(w.data(), t.rows, t.columns, scheme, threads);
    pack_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double error = relative_rms_error(w, packed);
    worst_error = std::max(worst_error, error);
    source_bytes += double(w.size()) * 4;
    packed_bytes += double(packed.geometry.total_bytes);
    tensors.push_back({{"name", t.name},
                       {"rows", t.rows},
                       {"columns", t.columns},
                       {"packed_bytes", packed.geometry.total_bytes},
                       {"relative_rms_error", error}});
    if (!o.json)
      std::printf("%-28s %-12s %10.1f %10.1f %9.5f\n", t.name.c_str(), t.shape_string().c_str(),
                  double(w.size()) * 4 / 1024, double(packed.geometry.total_bytes) / 1024, error);
  }
  const nlohmann::json summary = {{"model", o.model},
                                  {"quant", to_string(scheme)},
                                  {"tensors", tensors.size()},
                                  {"source_f32_bytes", source_bytes},
                                  {"packed_bytes", packed_bytes},
                                  {"pack_seconds", pack_seconds},
                                  {"pack_gb_per_s", source_bytes / pack_seconds / 1e9},
                                  {"worst_relative_rms_error", worst_error},
                                  {"threads", threads}};
  if (o.json) {
    nlohmann::json out = summary;
    out["per_tensor"] = tensors;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf(
      "\n%s: %zu linear tensors, %s, %.1f KiB f32 -> %.1f KiB packed (%.2fx smaller), "
      "packed in %.2f ms (%.2f GB/s, %d threads), worst relative RMS error %.5f\n",
      o.model.c_str(), tensors.size(), to_string(scheme).c_str(), source_bytes / 1024,
      packed_bytes / 1024, source_bytes / packed_bytes, pack_seconds * 1e3,
      source_bytes / pack_seconds / 1e9, threads, worst_error);
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "quantize", "Quantize + pack a model's linear layers and report sizes, speed and error");
  cmd->add_option("-m,--model", options->model, "Model file (GGUF or llama2.c .bin)")->required();
  cmd->add_option("--quant", options->quant,
                  "int8 | int4 | int8-g<G> | int4-g<G> [-asym] | int8-tensor (default int8)");
  cmd->add_option("-t,--threads", options->threads, "Packing threads (default: all)");
  cmd->add_flag("--json", options->json, "Print as JSON");
  cmd->add_option("-o,--out", options->out,
                  "Write the quantized model to this GGUF file (int8-g32 -> Q8_0, int4-g32 -> "
                  "Q4_0, int4-g32-asym -> Q4_1, other schemes in qforge's encoding; `run` loads "
                  "it without quantizing again)");
  cmd->add_option("--tokenizer", options->tokenizer,
                  "With -o: a llama2.c checkpoint's tokenizer.bin, written into the GGUF file "
                  "and used for --calib-text (default: tok<vocab>.bin or tokenizer.bin beside "
                  "the model)");
  cmd->add_option("--preset", options->preset, "With -o: policy preset (" + preset_names() + ")");
  cmd->add_option("--keep", options->keeps, "With -o: PATTERN[=f32|bf16] kept dense; repeatable");
  add_method_options(cmd, options->methods);
  cmd->add_option("--tensor-type", options->tensor_types,
                  "With -o: PATTERN=SCHEME for the matching tensors; repeatable");
  cmd->callback([options] { run(*options); });
}

}  // namespace qforge::cli
