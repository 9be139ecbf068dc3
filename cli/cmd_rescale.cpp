// qforge rescale -m MODEL -o OUT [--channels N] [--factor F] [--seed S] [--json]
// A function-preserving rescale that gives N input channels of every linear layer F
// times larger activations (what large LLMs have, and what SmoothQuant is for), to test
// outlier handling on small models: s = 1/F on the chosen channels, folded as SmoothQuant
// folds (calib/input_scaling.h: the norm or the v / up rows times F, the weight columns
// over F). The f32 model computes what it computed; int8 activations suffer. OUT is a
// byte copy of MODEL with the changed F32 tensors in place (same format).
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/input_scaling.h"
#include "cli/commands.h"
#include "jit/base/error.h"
#include "model/format/model_file.h"

namespace qforge::cli {
namespace {

struct Options {
  std::string model, out;
  int channels = 4;
  double factor = 40;
  unsigned seed = 1;
  bool json = false;
};

void rescale(const Options& o) {
  QF_REQUIRE(o.factor > 0, "--factor ", o.factor, ": expected a positive factor");
  ModelFile model = open_model(o.model);
  const LlamaConfig& c = model.config();
  std::mt19937 rng(o.seed);
  // `count` distinct channels of [0, width).
  const auto pick = [&](int width, int count) {
    QF_REQUIRE(count >= 0 && count <= width, "--channels ", count, ": the layers have ", width,
               " input channels at least");
    std::vector<int> all(static_cast<std::size_t>(width));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<std::size_t>(count));
    return all;
  };
  const int head_dim = c.dim / c.n_heads, tie = c.n_heads / c.n_kv_heads;
  nlohmann::json chosen = nlohmann::json::object();
  for (int l = 0; l < c.n_layers; ++l)
    for (const char* site : {"attn_qkv", "attn_output", "ffn_gate_up", "ffn_down"}) {
      const std::string name = "blk." + std::to_string(l) + "." + site;
      const bool down = std::string(site) == "ffn_down", wo = std::string(site) == "attn_output";
      std::vector<double> s(static_cast<std::size_t>(down ? c.hidden_dim : c.dim), 1.0);
      std::vector<int> channels;
      if (wo) {  // one v row per choice: every query head of its kv head
        for (int v_row : pick(c.n_kv_heads * head_dim, o.channels))
          for (int h = 0; h < tie; ++h) {
            const int channel = ((v_row / head_dim) * tie + h) * head_dim + v_row % head_dim;
            s[std::size_t(channel)] = 1 / o.factor;
            channels.push_back(channel);
          }
      } else {
        for (int channel : pick(static_cast<int>(s.size()), o.channels)) {
          s[std::size_t(channel)] = 1 / o.factor;
          channels.push_back(channel);
        }
      }
      fold_input_scales(model, l, site, s);
      chosen[name] = channels;
    }
  write_with_replacements(model, o.out);
  if (o.json) {
    std::printf("%s\n",
                nlohmann::json{
                    {"model", o.model}, {"out", o.out}, {"factor", o.factor}, {"channels", chosen}}
                    .dump()
                    .c_str());
    return;
  }
  std::printf("%s: %s with %d input channels per linear layer (%d layers) %gx larger\n",
              o.out.c_str(), o.model.c_str(), o.channels, c.n_layers * 4, o.factor);
}

}  // namespace

void register_rescale(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "rescale", "Write a function-preserving rescale of a model with activation outlier channels");
  cmd->add_option("-m,--model", options->model, "Model file (GGUF or llama2.c .bin)")->required();
  cmd->add_option("-o,--out", options->out, "The rescaled model (same format)")->required();
  cmd->add_option("--channels", options->channels,
                  "Input channels per linear layer made larger (default 4)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--factor", options->factor, "How much larger (default 40)");
  cmd->add_option("--seed", options->seed, "Which channels (default 1)");
  cmd->add_flag("--json", options->json, "Print the chosen channels as JSON");
  cmd->callback([options] { rescale(*options); });
}

}  // namespace qforge::cli
