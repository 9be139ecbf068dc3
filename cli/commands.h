// One file per subcommand; each registers itself on the app and runs when chosen.
#pragma once

#include <CLI/CLI.hpp>

namespace qforge::cli {

void register_bench(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_chat(CLI::App& app);
void register_dump_asm(CLI::App& app);
void register_info(CLI::App& app);
void register_quantize(CLI::App& app);
void register_quant_report(CLI::App& app);
void register_perplexity(CLI::App& app);
void register_rescale(CLI::App& app);
void register_run(CLI::App& app);
void register_serve(CLI::App& app);
void register_synth(CLI::App& app);
void register_tune(CLI::App& app);

}  // namespace qforge::cli
