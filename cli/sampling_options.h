// The sampling flags run and chat share (--temp, --top-k, --top-p, --seed).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "model/runtime/sampler.h"

namespace qforge::cli {

struct SamplingFlags {
  float temperature = 1.f;
  int top_k = 0;
  float top_p = 0.9f;
  long long seed = -1;  // -1: from the clock
};

void add_sampling_options(CLI::App* cmd, SamplingFlags& flags);
Sampler make_sampler(const SamplingFlags& flags);
std::uint64_t sampling_seed(const SamplingFlags& flags);  // --seed, else from the clock

}  // namespace qforge::cli
