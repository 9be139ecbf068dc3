// The tuner on a real small model (stories260K) with a tiny budget: it stays within the
// budget, and what it writes is a database this CPU accepts, whose blockings all fit.
// Then `qforge tune` end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "jit/gemm/register_budget.h"
#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "jit/tune/tuner.h"
#include "model/llama_weights.h"
#include "model/model_file.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

namespace qforge {
namespace {

std::string model() {
  return test::model_path("stories260K/stories260K.bin");
}

std::vector<GemmKey> model_keys(const std::string& quant) {
  clear_tuning();
  const ModelFile file = open_model(model());
  return build_llama_weights(file, parse_precision(quant), 1).warmup_keys();
}

TEST(Tuner, TinyBudgetWritesADatabaseThisCpuAccepts) {
  const std::vector<GemmKey> keys = model_keys("int4-g32");
  TunerOptions options;
  options.threads = 1;
  options.budget_seconds = 6;  // M = 1 set-up alone copies 8 x L3 of weights per shape
  options.ms = {1, 6};
  int progress_calls = 0;
  options.on_progress = [&](const TunerProgress& p) {
    ++progress_calls;
    EXPECT_LT(p.task, p.tasks);
  };
  TuningDb db(cpu_signature());
  const TuneReport report = tune_kernels(keys, options, db);
  EXPECT_LT(report.seconds, options.budget_seconds + 1.0);  // one sample may run over
  EXPECT_EQ(report.tasks, 10u);  // 5 shapes (qkv, wo, gate/up, down, classifier) x 2 buckets
  EXPECT_GT(report.tuned, 0u);
  EXPECT_EQ(db.size(), report.tuned);
  EXPECT_GT(progress_calls, 0);
  for (const TunedMeasurement& row : report.rows) {
    EXPECT_GT(row.default_us, 0);
    EXPECT_GT(row.tuned_us, 0);
    EXPECT_TRUE(fits(row.key, row.key.blocking)) << kernel_name(row.key);
    if (row.kept_default) {
      EXPECT_EQ(row.key.blocking, row.default_blocking);
      EXPECT_EQ(row.tuned_us, row.default_us);
    } else {
      EXPECT_NE(row.key.blocking, row.default_blocking);
    }
    EXPECT_GE(row.noise, 0.01);
  }

  test::ScratchDir dir;
  db.save(dir.path() / "db.json");
  const TuningDbLoad loaded = load_tuning_db(dir.path() / "db.json", cpu_signature());
  ASSERT_TRUE(loaded.db) << loaded.error;
  EXPECT_TRUE(loaded.warnings.empty());
  EXPECT_EQ(loaded.db->size(), db.size());
  for (const auto& [key, tuned] : loaded.db->entries()) {
    EXPECT_TRUE(fits(key.shape, tuned.blocking)) << kernel_name(key.shape);
    EXPECT_EQ(key.threads, 1);
    EXPECT_GT(tuned.default_us, 0);
  }
}

TEST(Tuner, NoBudgetTunesNothingAndSaysSo) {
  const std::vector<GemmKey> keys = model_keys("int8");
  TunerOptions options;
  options.budget_seconds = 0;
  TuningDb db(cpu_signature());
  const TuneReport report = tune_kernels(keys, options, db);
  EXPECT_EQ(report.tuned, 0u);
  EXPECT_EQ(db.size(), 0u);
  ASSERT_FALSE(report.notes.empty());
  EXPECT_NE(report.notes.front().find("budget"), std::string::npos);
}

test::CommandResult qforge(const std::string& arguments) {
  return test::run_command(std::string(QFORGE_BINARY) + " " + arguments);
}

TEST(TuneCommand, WritesTheDatabaseTableAndChart) {
  test::ScratchDir dir;
  const std::string db = dir.file("tuning/db.json"), svg = dir.file("chart.svg");
  const auto result = qforge("tune -m " + model() + " -t 1 --budget-seconds 6 --m 1,8 --out " + db +
                             " --svg " + svg);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("speed-up"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("gemm_u8s8_"), std::string::npos) << result.output;
  const TuningDbLoad loaded = load_tuning_db(db, cpu_signature());
  ASSERT_TRUE(loaded.db) << loaded.error;
  EXPECT_GT(loaded.db->size(), 0u);
  std::ifstream chart(svg);
  const std::string text((std::istreambuf_iterator<char>(chart)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("<svg", 0), 0u);
  EXPECT_NE(text.find("<circle"), std::string::npos);
  EXPECT_NE(text.find("</svg>"), std::string::npos);
}

TEST(TuneCommand, RefusesWhatItCannotTune) {
  test::ScratchDir dir;
  const auto f32 = qforge("tune -m " + model() + " --quant f32 --out " + dir.file("x.json"));
  EXPECT_EQ(f32.exit_code, 1) << f32.output;
  EXPECT_NE(f32.output.find("no JIT kernels"), std::string::npos) << f32.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("x.json")));
  const auto budget = qforge("tune -m " + model() + " --budget-seconds 0");
  EXPECT_EQ(budget.exit_code, 1) << budget.output;
}

}  // namespace
}  // namespace qforge
