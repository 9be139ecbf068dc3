// --tuning / --no-tuning: the database for this CPU is picked up, and a foreign, old or
// corrupt one costs exactly one warning line and nothing else.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/tuning_option.h"
#include "jit/gemm/register_budget.h"
#include "jit/tune/active_tuning.h"
#include "jit/tune/cpu_signature.h"
#include "ops/linear/quantized_linear.h"
#include "tests/model/model_test_util.h"

namespace qforge {
namespace {

GemmKey sample_key() {
  GemmKey key;
  key.isa = Isa::avx2;
  key.n = 64;
  key.k = 128;
  key.k_padded = 128;
  key.group = 128;
  key.bucket = MBucket::large;
  return key;
}

// A database for `signature` holding a non-default blocking for sample_key() on 2 threads.
TuningDb sample_db(const std::string& signature) {
  TuningDb db(signature);
  const GemmKey key = sample_key();
  TunedKernel tuned;
  tuned.blocking = default_blocking(key);
  tuned.blocking.k_unroll = tuned.blocking.k_unroll == 1 ? 2 : 1;
  db.set(tuning_key_of(key, 2), tuned);
  return db;
}

int lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

struct Applied {
  cli::TuningStatus status;
  std::string stderr_text;
};

Applied apply(const cli::TuningOptions& options, int threads = 2) {
  testing::internal::CaptureStderr();
  Applied out{cli::apply_tuning(options, threads), ""};
  out.stderr_text = testing::internal::GetCapturedStderr();
  return out;
}

TEST(TuningOption, TheDefaultDatabaseForThisCpuIsInstalled) {
  test::ScratchDir dir;
  const char* saved = std::getenv("XDG_CACHE_HOME");
  const std::string before = saved ? saved : "";
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);

  const Applied missing = apply({});  // no database yet: silent, nothing installed
  EXPECT_FALSE(missing.status.active);
  EXPECT_EQ(missing.stderr_text, "");
  EXPECT_FALSE(tuned_blocking(sample_key()));

  sample_db(cpu_signature()).save(default_tuning_path());
  const Applied found = apply({});
  EXPECT_TRUE(found.status.active);
  EXPECT_EQ(found.stderr_text, "");
  ASSERT_TRUE(tuned_blocking(sample_key()));
  EXPECT_NE(*tuned_blocking(sample_key()), default_blocking(sample_key()));
  const std::vector<GemmKey> keys = {sample_key(), sample_key(), [] {
                                       GemmKey other = sample_key();
                                       other.n = 80;
                                       return other;
                                     }()};
  EXPECT_EQ(cli::tuning_summary(found.status, keys),
            "tuning: 1 of 2 kernels tuned (" + default_tuning_path().string() + ")");

  const Applied other_threads = apply({}, 1);  // entries are for 2 threads
  EXPECT_TRUE(other_threads.status.active);
  EXPECT_FALSE(tuned_blocking(sample_key()));

  const Applied off = apply({.file = "", .disabled = true});
  EXPECT_FALSE(off.status.active);
  EXPECT_FALSE(tuned_blocking(sample_key()));
  EXPECT_EQ(cli::tuning_summary(off.status, keys), "tuning: off (--no-tuning)");

  if (saved)
    setenv("XDG_CACHE_HOME", before.c_str(), 1);
  else
    unsetenv("XDG_CACHE_HOME");
  clear_tuning();
}

// The AMX row threshold comes from the database for the run's thread count (the largest
// any shape needed), and goes back to the default without it.
TEST(TuningOption, TheAmxThresholdComesFromTheDatabase) {
  test::ScratchDir dir;
  TuningDb db = sample_db(cpu_signature());
  GemmKey a = sample_key(), b = sample_key();
  b.n = 96;
  TunedKernel tuned;
  tuned.blocking = default_blocking(a);
  tuned.amx_min_m = 24;
  db.set(tuning_key_of(a, 2), tuned);
  tuned.amx_min_m = 40;
  db.set(tuning_key_of(b, 2), tuned);
  tuned.amx_min_m = 64;  // another thread count: not this run's
  db.set(tuning_key_of(b, 1), tuned);
  const std::string path = dir.file("amx.json");
  db.save(path);

  const Applied two = apply({.file = path, .disabled = false}, 2);
  EXPECT_EQ(two.status.amx_min_m, 40);
  EXPECT_EQ(amx_min_rows(), 40);
  const Applied off = apply({.file = "", .disabled = true}, 2);
  EXPECT_EQ(amx_min_rows(), kDefaultAmxMinRows);
  clear_tuning();
}

TEST(TuningOption, ForeignOldOrCorruptFilesCostOneWarningLine) {
  test::ScratchDir dir;
  const std::string foreign = dir.file("foreign.json"), old = dir.file("old.json"),
                    corrupt = dir.file("corrupt.json"), half = dir.file("half.json"),
                    partly = dir.file("partly.json");
  sample_db("SomeOtherCpu-1-2-3_avx2_c64_l2-1m").save(foreign);
  std::string text = sample_db(cpu_signature()).to_json();
  std::ofstream(old) << std::string(text).replace(text.find("\"version\": 1"), 12,
                                                  "\"version\": 0");
  std::ofstream(corrupt) << "\x7f"
                            "ELF garbage";
  std::ofstream(half) << text.substr(0, text.size() / 2);
  // One valid entry and one whose blocking cannot fit: the valid one is used.
  TuningDb two = sample_db(cpu_signature());
  GemmKey wide = sample_key();
  wide.n = 4096;
  TunedKernel fine;
  fine.blocking = default_blocking(wide);
  two.set(tuning_key_of(wide, 2), fine);
  nlohmann::json doc = nlohmann::json::parse(two.to_json());
  for (auto& entry : doc["entries"])
    if (entry["n"] == 4096) entry["blocking"]["nr"] = 8;  // 8 AVX2 int8 units never fit
  std::ofstream(partly) << doc.dump();

  for (const std::string& file : {foreign, old, corrupt, half, dir.file("absent.json")}) {
    const Applied applied = apply({.file = file});
    EXPECT_FALSE(applied.status.active) << file;
    EXPECT_EQ(lines(applied.stderr_text), 1) << applied.stderr_text;
    EXPECT_NE(applied.stderr_text.find("warning"), std::string::npos) << applied.stderr_text;
    EXPECT_FALSE(tuned_blocking(sample_key()));
  }
  const Applied applied = apply({.file = partly});
  EXPECT_TRUE(applied.status.active);
  EXPECT_EQ(lines(applied.stderr_text), 1) << applied.stderr_text;
  EXPECT_TRUE(tuned_blocking(sample_key()));
  EXPECT_FALSE(tuned_blocking(wide));
  clear_tuning();
}

}  // namespace
}  // namespace qforge
