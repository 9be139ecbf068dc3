// qforge: the command-line entry point. Errors print one line naming what was wrong and
// exit non-zero.
#include <cstdio>
#include <exception>
#include <new>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "jit/base/error.h"

int main(int argc, char** argv) {
  CLI::App app{"qforge: JIT-compiled quantized LLM inference for x86 CPUs"};
  app.require_subcommand(1);
  qforge::cli::register_bench(app);
  qforge::cli::register_calibrate(app);
  qforge::cli::register_dump_asm(app);
  qforge::cli::register_info(app);
  qforge::cli::register_quantize(app);
  qforge::cli::register_rescale(app);
  qforge::cli::register_quant_report(app);
  qforge::cli::register_perplexity(app);
  qforge::cli::register_run(app);
  qforge::cli::register_serve(app);
  qforge::cli::register_chat(app);
  qforge::cli::register_synth(app);
  qforge::cli::register_tune(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "qforge: error: out of memory; free memory or raise the process's limit "
                 "(ulimit -v)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qforge: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
