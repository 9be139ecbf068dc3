// End to end through the CLI: `qforge run` with the AMX kernels (QFORGE_AMX=emulate on a
// CPU without AMX, natively otherwise) prints the same greedy tokens as the zmm kernels.
// A prompt of at least 16 tokens makes the prefill run on AMX; decode stays on zmm.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jit/cpu/isa.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/test_data.h"

namespace qforge::test {
namespace {

struct RunResult {
  int exit_code = -1;
  std::string text;   // stdout: the generated text
  std::string stats;  // stderr
};

bool amx_native() {
  return (hardware_isa_mask(cpu_info()) & isa_bit(Isa::amx)) != 0;
}

// QFORGE_AMX=emulate where AMX is missing: AMX, and the AVX-512 it needs, run emulated;
// with `max_isa` avx512-vnni that is the zmm path under the same emulator.
RunResult qforge_run(const std::string& prompt, const std::string& max_isa,
                     const std::string& amx_mode = "emulate", const std::string& quant = "int8") {
  const std::filesystem::path stderr_file =
      std::filesystem::temp_directory_path() / ("qforge_amx_run_" + std::to_string(getpid()));
  const std::string environment = amx_native() ? "" : "QFORGE_AMX=" + amx_mode + " ";
  const std::string command = "( " + environment + QFORGE_BINARY + " run -m " +
                              model_path("stories260K/stories260K.gguf") + " --quant " + quant +
                              " --max-isa " + max_isa + " -p '" + prompt +
                              "' -n 64 --temp 0 -t 2 2>" + stderr_file.string() + " )";
  const CommandResult r = run_command(command);
  RunResult out{r.exit_code, r.output, ""};
  std::ifstream errors(stderr_file);
  std::ostringstream text;
  text << errors.rdbuf();
  out.stats = text.str();
  std::filesystem::remove(stderr_file);
  return out;
}

// "JIT 1.2 ms (N kernels)" from the load line.
int kernel_count(const std::string& stats) {
  const std::size_t end = stats.find(" kernels)");
  if (end == std::string::npos) return -1;
  const std::size_t open = stats.rfind('(', end);
  if (open == std::string::npos || open + 1 == end) return -1;
  const std::string digits = stats.substr(open + 1, end - open - 1);
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoi(digits);
}

void expect_same_tokens_as_zmm(const std::string& prompt) {
  const RunResult amx = qforge_run(prompt, "amx");
  ASSERT_EQ(amx.exit_code, 0) << amx.text << amx.stats;
  const RunResult zmm = qforge_run(prompt, "avx512-vnni");
  ASSERT_EQ(zmm.exit_code, 0) << zmm.text << zmm.stats;
  EXPECT_GT(amx.text.size(), prompt.size() + 100) << amx.text;
  EXPECT_EQ(amx.text, zmm.text);
  EXPECT_NE(amx.stats.find("amx kernels"), std::string::npos) << amx.stats;
  EXPECT_NE(zmm.stats.find("avx512-vnni kernels"), std::string::npos) << zmm.stats;
  if (!amx_native()) {
    EXPECT_NE(amx.stats.find("QFORGE_AMX=emulate"), std::string::npos) << amx.stats;
  }
  // The AMX kernels were generated beside the zmm ones.
  EXPECT_GT(kernel_count(amx.stats), kernel_count(zmm.stats)) << amx.stats << zmm.stats;
}

// The command: a 5-token prompt, so prefill and decode both stay below the AMX
// threshold; the tokens must not change.
TEST(AmxRun, ShortPromptSameTokensAsZmm) {
  expect_same_tokens_as_zmm("Once upon a time");
}

// 20+ prompt tokens: the prefill runs on AMX tiles.
TEST(AmxRun, LongPromptPrefillsOnAmxWithTheSameTokens) {
  expect_same_tokens_as_zmm(
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the park with her friends");
}

// `qforge perplexity --json` of the first 3000 bytes of the eval text (chunks of 128
// tokens: every prefill on the tiles) with weight-only int4 and bf16 math.
nlohmann::json weight_only_perplexity(const std::string& max_isa) {
  const std::filesystem::path text =
      std::filesystem::temp_directory_path() / ("qforge_amx_text_" + std::to_string(getpid()));
  std::ofstream(text) << read_test_data("stories260K_eval.txt").substr(0, 3000);
  const std::string environment = amx_native() ? "" : "QFORGE_AMX=emulate ";
  const CommandResult r =
      run_command("( " + environment + QFORGE_BINARY + " perplexity -m " +
                  model_path("stories260K/stories260K.gguf") + " -f " + text.string() +
                  " --ctx 128 --quant woq-int4-g128 --woq-math bf16 --max-isa " + max_isa +
                  " -t 2 --json 2>/dev/null )");
  std::filesystem::remove(text);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output, nullptr, false);
}

// Weight-only int4 with bf16 math: a long prompt's prefill runs on AMX-BF16 tiles (their
// kernels are generated beside the zmm ones), and perplexity and KLD agree with the zmm
// bf16 kernels to float rounding (the tiles sum the same bf16 products in another order).
TEST(AmxRun, WeightOnlyInt4PrefillsOnBf16TilesWithTheSameQuality) {
  const std::string prompt =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in "
      "the park with her friends";
  const RunResult amx = qforge_run(prompt, "amx", "emulate", "woq-int4-g128 --woq-math bf16");
  ASSERT_EQ(amx.exit_code, 0) << amx.text << amx.stats;
  const RunResult zmm =
      qforge_run(prompt, "avx512-vnni", "emulate", "woq-int4-g128 --woq-math bf16");
  ASSERT_EQ(zmm.exit_code, 0) << zmm.text << zmm.stats;
  EXPECT_NE(amx.stats.find("amx kernels"), std::string::npos) << amx.stats;
  EXPECT_GT(kernel_count(amx.stats), kernel_count(zmm.stats)) << amx.stats << zmm.stats;

  const nlohmann::json tiles = weight_only_perplexity("amx");
  const nlohmann::json vectors = weight_only_perplexity("avx512-vnni");
  ASSERT_TRUE(tiles.is_object() && vectors.is_object());
  EXPECT_EQ(tiles["isa"], "amx");
  EXPECT_GE(tiles["chunks"].get<int>(), 3);
  const double ppl = vectors["perplexity"].get<double>();
  EXPECT_NEAR(tiles["perplexity"].get<double>(), ppl, 1e-4 * ppl);
  EXPECT_NEAR(tiles["mean_kld"].get<double>(), vectors["mean_kld"].get<double>(), 1e-4);
  EXPECT_GT(vectors["mean_kld"].get<double>(), 0.01);  // int4 weights: a KLD to agree on
}

TEST(AmxRun, UnknownModeIsAnErrorNamingTheVariable) {
  if (amx_native()) GTEST_SKIP() << "the variable is only read where AMX is emulated";
  const RunResult r = qforge_run("Once", "amx", "sometimes");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.stats.find("QFORGE_AMX: 'sometimes' is not one of off|emulate"), std::string::npos)
      << r.stats;
}

}  // namespace
}  // namespace qforge::test
