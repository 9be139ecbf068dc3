#include "cli/sampling_options.h"

#include <chrono>

namespace qforge::cli {

void add_sampling_options(CLI::App* cmd, SamplingFlags& flags) {
  cmd->add_option("--temp", flags.temperature, "Sampling temperature; 0 = greedy (default 1)");
  cmd->add_option("--top-k", flags.top_k, "Keep the K most probable tokens; 0 = off (default)");
  cmd->add_option("--top-p", flags.top_p, "Nucleus sampling threshold (default 0.9)");
  cmd->add_option("--seed", flags.seed, "Random seed (default: time)");
}

std::uint64_t sampling_seed(const SamplingFlags& flags) {
  return flags.seed >= 0 ? static_cast<std::uint64_t>(flags.seed)
                         : static_cast<std::uint64_t>(
                               std::chrono::system_clock::now().time_since_epoch().count());
}

Sampler make_sampler(const SamplingFlags& flags) {
  SamplerOptions sampling;
  sampling.temperature = flags.temperature;
  sampling.top_k = flags.top_k;
  sampling.top_p = flags.top_p;
  sampling.seed = sampling_seed(flags);
  return Sampler(sampling);
}

}  // namespace qforge::cli
