// qforge synth --preset tinyllama-1.1b|llama2-7b|stories260k|<dims> [--layers L]
//              [--type f32|f16|bf16|q8_0|q4_0|q4_1] [--seed S] -o FILE.gguf
// Writes a Llama GGUF of a real model's dimensions with random weights, for speed work.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "model/runtime/synthetic_model.h"

namespace qforge::cli {
namespace {

struct Options {
  std::string preset;
  int layers = 0;
  std::string type = "f16";
  std::uint64_t seed = 1;
  std::string output;
};

void synth(const Options& o) {
  SyntheticModelSpec spec = synthetic_spec(o.preset);
  if (o.layers > 0) spec.config.n_layers = o.layers;
  spec.type = parse_synthetic_type(o.type);
  spec.seed = o.seed;
  spec.name = "qforge-synthetic-" + o.preset;
  const auto start = std::chrono::steady_clock::now();
  write_synthetic_model(spec, o.output);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto bytes = std::filesystem::file_size(o.output);
  std::fprintf(stderr, "qforge synth: %s: %s, %s, %.1f MiB in %.1f s\n", o.output.c_str(),
               spec.config.to_string().c_str(), o.type.c_str(),
               static_cast<double>(bytes) / (1 << 20), seconds);
}

}  // namespace

void register_synth(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("synth", "Write a Llama GGUF with random weights at real sizes");
  cmd->add_option(
         "--preset", options->preset,
         "Dimensions: " + synthetic_preset_names() +
             ", or dim=D,hidden=H,layers=L,heads=Q,kv-heads=KV,vocab=V[,ctx=C][,style=llama3]")
      ->required();
  cmd->add_option("--layers", options->layers, "Override the preset's layer count")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--type", options->type,
                  "Matrix type: f32 | f16 (default) | bf16 | q8_0 | q4_0 | q4_1");
  cmd->add_option("--seed", options->seed, "Random seed (default 1)");
  cmd->add_option("-o,--output", options->output, "Output GGUF file")->required();
  cmd->callback([options] { synth(*options); });
}

}  // namespace qforge::cli
