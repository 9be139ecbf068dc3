// The tuner on a real small model (stories260K) with a tiny budget: it stays within the
// budget, and what it writes is a database this CPU accepts, whose blockings all fit.
// Then `qforge tune` end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "jit/gemm/register_budget.h"
#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/pack.h"
#include "ops/tune/call_policy_search.h"
#include "ops/tune/tuner.h"
#include "tests/model/model_test_util.h"
#include "tests/support/isa_cap.h"
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
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a 10 s tuning budget measures nothing under ThreadSanitizer's slowdown";
#endif
  // The vector kernels' tuning: no AMX keys on AMX hosts either.
  const test::ScopedIsaCap cap(Isa::avx512_vnni);
  const std::vector<GemmKey> keys = model_keys("int4-g32");
  TunerOptions options;
  options.threads = 1;
  options.budget_seconds = 10;  // M = 1 set-up alone copies up to 256 MiB of weights per shape
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

// A weight-only model: every bucket's keys are generated and tuned (the M = 1 key's
// accumulator chains stay with M = 1), and where a VNNI ISA runs, the split keys of its
// one-row calls are tuned once each, for M = 1 only.
TEST(Tuner, WeightOnlyModelTunesEveryBucketAndItsSplitKeys) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a 20 s tuning budget measures nothing under ThreadSanitizer's slowdown";
#endif
  const test::ScopedIsaCap cap(Isa::avx512_vnni);
  const WeightOnlyMath saved = weight_only_math();
  set_weight_only_math(WeightOnlyMath::automatic);
  const std::vector<GemmKey> keys = model_keys("woq-int8");
  set_weight_only_math(saved);
  std::set<std::string> split_names;  // distinct shapes (the layers share them)
  for (const GemmKey& key : keys)
    if (key.split_digits() != 0) split_names.insert(kernel_name(key));
  const std::size_t split_keys = split_names.size();
  const bool vnni = isa_usable(Isa::avx512_vnni) || isa_usable(Isa::avx_vnni);
  EXPECT_EQ(split_keys > 0, vnni);
  TunerOptions options;
  options.threads = 1;
  options.budget_seconds = 20;
  options.ms = {1, 6};
  TuningDb db(cpu_signature());
  const TuneReport report = tune_kernels(keys, options, db);
  for (const std::string& note : report.notes)
    EXPECT_EQ(note.find("skipped"), std::string::npos) << note;
  EXPECT_EQ(report.tasks, 10u + split_keys);  // 5 shapes x 2 buckets, and the split keys
  std::size_t split_rows = 0;
  for (const TunedMeasurement& row : report.rows) {
    EXPECT_TRUE(fits(row.key, row.key.blocking)) << kernel_name(row.key);
    if (row.key.split_digits() == 0) continue;
    ++split_rows;
    EXPECT_EQ(row.m, 1) << kernel_name(row.key);
    EXPECT_EQ(row.key.blocking.mr, row.key.split_digits());
  }
  EXPECT_LE(split_rows, split_keys);
}

// On two threads the tuner also decides how calls are made: the small-M task writes the
// GEMV/GEMM threshold, the large-M task the thread split, and the report shows both.
TEST(Tuner, TwoThreadsDecideTheCallPolicies) {
  // The vector kernels' tuning: no AMX keys on AMX hosts either.
  const test::ScopedIsaCap cap(Isa::avx512_vnni);
  clear_tuning();
  const std::int64_t n = 512, k = 512;
  const auto w = std::vector<float>(n * k, 0.01f);
  const PackedWeights packed = pack_weights(w.data(), n, k, parse_quant_scheme("int8"), 1);
  const GemmKey shape = gemm_key_for(packed.header, Epilogue{}, best_isa(), 1);
  TunerOptions options;
  options.threads = 2;
  options.budget_seconds = 30;
  options.ms = {1, 4, 128};
  TuningDb db(cpu_signature());
  const TuneReport report = tune_kernels(std::vector<GemmKey>{shape}, options, db);
  EXPECT_EQ(report.tasks, 3u);
  ASSERT_EQ(report.tuned, 3u);
  GemmKey small = shape, large = shape;
  small.bucket = MBucket::small;
  large.bucket = MBucket::large;
  const TunedKernel* gemv = db.find(tuning_key_of(small, 2));
  const TunedKernel* gemm = db.find(tuning_key_of(large, 2));
  ASSERT_TRUE(gemv && gemm);
  ASSERT_TRUE(gemv->gemm_min_m.has_value());
  EXPECT_GE(*gemv->gemm_min_m, 2);
  EXPECT_LE(*gemv->gemm_min_m, 9);
  EXPECT_TRUE(gemm->thread_split.has_value());
  ASSERT_EQ(report.policies.size(), 2u);
  for (const CallPolicyMeasurement& p : report.policies) {
    ASSERT_EQ(p.first_us.size(), p.ms.size());
    ASSERT_EQ(p.second_us.size(), p.ms.size());
    for (std::size_t i = 0; i < p.ms.size(); ++i)
      EXPECT_TRUE(p.first_us[i] > 0 && p.second_us[i] > 0);
  }
  // What was written loads back with the same call policies.
  test::ScratchDir dir;
  db.save(dir.path() / "db.json");
  const TuningDbLoad loaded = load_tuning_db(dir.path() / "db.json", cpu_signature());
  ASSERT_TRUE(loaded.db) << loaded.error;
  EXPECT_EQ(loaded.db->find(tuning_key_of(small, 2))->gemm_min_m, gemv->gemm_min_m);
  EXPECT_EQ(loaded.db->find(tuning_key_of(large, 2))->thread_split, gemm->thread_split);
}

// The AMX threshold, measured through the emulator here (so the value says nothing about
// a CPU; the test checks what is measured and written): an AMX key has no blocking to
// search, and its threshold lands on the shape's zmm GEMM entry, where runs read it.
TEST(Tuner, AmxTaskMeasuresTheAmxThreshold) {
  const unsigned missing = (emulate::kAvx512 | emulate::kAmx) & ~emulate::native_features();
  std::string reason;
  if (missing != 0) {
    ASSERT_TRUE(emulate::install(missing, &reason)) << reason;
  }
  const IsaMask before = emulated_isa_mask();
  set_emulated_isa_mask(before | isa_bit(Isa::avx512_vnni) | isa_bit(Isa::amx));
  clear_tuning();
  const std::int64_t n = 64, k = 128;
  const auto w = std::vector<float>(n * k, 0.02f);
  const PackedWeights packed = pack_weights(w.data(), n, k, parse_quant_scheme("int8"), 1);
  const GemmKey amx = gemm_key_for(packed.header, Epilogue{}, Isa::amx, 32);
  TunerOptions options;
  options.threads = 1;
  options.budget_seconds = 60;
  options.ms = {32};
  options.allow_emulated = true;
  TuningDb db(cpu_signature());
  const TuneReport report = tune_kernels(std::vector<GemmKey>{amx}, options, db);
  set_emulated_isa_mask(before);
  if (missing != 0) emulate::uninstall();

  ASSERT_EQ(report.policies.size(), 1u) << (report.notes.empty() ? "" : report.notes.front());
  const CallPolicyMeasurement& p = report.policies.front();
  EXPECT_EQ(p.key.isa, Isa::amx);
  EXPECT_EQ(p.ms.size(), kAmxCrossoverRows.size());
  for (std::size_t i = 0; i < p.ms.size(); ++i)
    EXPECT_TRUE(p.first_us[i] > 0 && p.second_us[i] > 0);
  EXPECT_EQ(p.decision.rfind("AMX from M = ", 0), 0u) << p.decision;
  GemmKey zmm = amx;
  zmm.isa = Isa::avx512_vnni;
  zmm.bucket = MBucket::large;
  const TunedKernel* entry = db.find(tuning_key_of(zmm, 1));
  ASSERT_NE(entry, nullptr);
  ASSERT_TRUE(entry->amx_min_m.has_value());
  EXPECT_GE(*entry->amx_min_m, 8);
  EXPECT_LE(*entry->amx_min_m, 65);
  EXPECT_EQ(entry->blocking, default_blocking(zmm));
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
  // Alone this takes about 1.5 s; the budget is a bound for a host busy with other suites.
  const auto result = qforge("tune -m " + model() +
                             " -t 1 --max-isa avx512-vnni --budget-seconds 30 --m 1,8 --out " + db +
                             " --svg " + svg);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("speed-up"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("gemm_u8s8_"), std::string::npos) << result.output;
  const TuningDbLoad loaded = load_tuning_db(db, cpu_signature());
  ASSERT_TRUE(loaded.db) << loaded.error;
  EXPECT_GT(loaded.db->size(), 0u) << result.output;
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
