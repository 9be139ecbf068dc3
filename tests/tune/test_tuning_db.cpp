// The tuning database on disk: round trip, atomic save, and every way a file can be wrong
// (another CPU, another format or generator version, corrupt, truncated, invalid entries).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "jit/gemm/register_budget.h"
#include "jit/tune/cpu_signature.h"
#include "jit/tune/tuning_db.h"
#include "tests/model/model_test_util.h"

namespace qforge {
namespace {

constexpr const char* kSignature = "GenuineIntel-6-143-8_avx2.avx-vnni.avx512-vnni.amx_c56_l2-2m";

GemmKey shape(Isa isa, std::int64_t n, std::int64_t k, std::int64_t group, int bits, bool asym,
              Epilogue epilogue, MBucket bucket) {
  GemmKey key;
  key.isa = isa;
  key.n = n;
  key.k = k;
  key.k_padded = (k + group - 1) / group * group;
  key.group = group;
  key.bits = bits;
  key.asymmetric = asym;
  key.epilogue = epilogue;
  key.bucket = bucket;
  return key;
}

TuningDb sample_db() {
  TuningDb db(kSignature);
  const Epilogue plain, swiglu{.swiglu = true}, residual{.residual = true};
  const Epilogue bias_u8{.bias = true, .output = OutputKind::u8};
  int i = 0;
  for (Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512_vnni})
    for (const Epilogue& e : {plain, swiglu, residual, bias_u8})
      for (MBucket bucket : {MBucket::one, MBucket::small, MBucket::large}) {
        GemmKey key = shape(isa, 2048 + 16 * i, 5632, i % 2 ? 128 : 5632, i % 3 ? 8 : 4, i % 5 == 0,
                            e, bucket);
        if (i % 7 == 3) key.activation = ActivationKind::f32;  // weight-only kernels
        if (i % 6 == 3 && key.group == 128) {  // two-level scales (K-quant super-blocks)
          key.group = 32;
          key.k_padded = 5632;
          key.superblock_groups = 8;
        }
        if (i % 7 == 5 && isa == Isa::avx512_vnni && key.bits == 4)
          key.activation = ActivationKind::bf16;
        TunedKernel t;
        t.blocking = default_blocking(key);
        t.blocking.k_unroll = 1 + i % 8;
        t.default_us = 100.5 + i;
        t.tuned_us = 90.25 + i;
        if (i % 4 == 0) t.amx_min_m = 16 + i;
        if (i % 4 == 1) t.gemm_min_m = 5;
        if (i % 4 == 2) t.thread_split = ThreadSplit::rows;
        db.set(tuning_key_of(key, 1 + i % 3), t);
        ++i;
      }
  return db;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

void replace_once(std::string& text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
}

TEST(TuningDb, RoundTripKeepsEveryEntryAndField) {
  test::ScratchDir dir;
  const TuningDb db = sample_db();
  ASSERT_EQ(db.size(), 36u);
  const auto path = dir.path() / "nested" / "dirs" / "db.json";  // save creates them
  db.save(path);
  const TuningDbLoad loaded = load_tuning_db(path, kSignature);
  ASSERT_TRUE(loaded.db) << loaded.error;
  EXPECT_TRUE(loaded.warnings.empty());
  ASSERT_EQ(loaded.db->size(), db.size());
  int two_level = 0;
  for (const auto& [key, want] : db.entries()) two_level += key.shape.superblock_groups > 0;
  EXPECT_GT(two_level, 0);
  for (const auto& [key, want] : db.entries()) {
    const TunedKernel* got = loaded.db->find(key);
    ASSERT_NE(got, nullptr) << kernel_name(key.shape) << " threads " << key.threads;
    EXPECT_EQ(got->blocking, want.blocking);
    EXPECT_EQ(got->amx_min_m, want.amx_min_m);
    EXPECT_EQ(got->gemm_min_m, want.gemm_min_m);
    EXPECT_EQ(got->thread_split, want.thread_split);
    EXPECT_EQ(got->default_us, want.default_us);
    EXPECT_EQ(got->tuned_us, want.tuned_us);
  }
  // Saved again, the text is the same (stable order).
  EXPECT_EQ(loaded.db->to_json(), db.to_json());
}

TEST(TuningDb, SaveReplacesAtomicallyAndLeavesNoTemporaryFile) {
  test::ScratchDir dir;
  const auto path = dir.path() / "db.json";
  write_text(path, "old contents");
  sample_db().save(path);
  EXPECT_TRUE(load_tuning_db(path, kSignature).db);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "db.json");
  }
  EXPECT_EQ(files, 1);
}

TEST(TuningDb, LookupIgnoresTheKeysBlockingButNotTheThreadCount) {
  const TuningDb db = sample_db();
  const auto& [key, tuned] = *db.entries().begin();
  GemmKey with_blocking = key.shape;
  with_blocking.blocking = Blocking{3, 1, 2, 512};
  ASSERT_NE(db.find(tuning_key_of(with_blocking, key.threads)), nullptr);
  EXPECT_EQ(db.find(tuning_key_of(with_blocking, key.threads + 7)), nullptr);
}

TEST(TuningDb, ForeignSignatureIsRejected) {
  test::ScratchDir dir;
  const auto path = dir.path() / "db.json";
  sample_db().save(path);
  const TuningDbLoad loaded = load_tuning_db(path, "AuthenticAMD-25-1-1_avx2_c2_l2-512k");
  EXPECT_FALSE(loaded.db);
  EXPECT_NE(loaded.error.find("for CPU"), std::string::npos) << loaded.error;
  EXPECT_NE(loaded.error.find(path.string()), std::string::npos) << loaded.error;
}

TEST(TuningDb, OtherFormatOrGeneratorVersionIsRejected) {
  const std::string good = sample_db().to_json();
  const std::string generator = "\"generator_version\": " + std::to_string(kGemmGeneratorVersion);
  for (const auto& [from, to, says] :
       {std::tuple<std::string, std::string, std::string>{"\"version\": 1", "\"version\": 2",
                                                          "format version"},
        {"\"version\": 1", "\"version\": \"1\"", "format version"},
        {generator, "\"generator_version\": 99", "generator version"},
        {"\"format\": \"qforge-tuning\"", "\"format\": \"other\"", "not a qforge"}}) {
    std::string text = good;
    replace_once(text, from, to);
    const TuningDbLoad loaded = parse_tuning_db(text, kSignature, "db.json");
    EXPECT_FALSE(loaded.db) << to;
    EXPECT_NE(loaded.error.find(says), std::string::npos) << loaded.error;
  }
}

TEST(TuningDb, CorruptFilesAreRejectedWithoutThrowing) {
  for (const std::string& text :
       {std::string(), std::string("{"), std::string("null"), std::string("[1, 2]"),
        std::string("\x89PNG\r\n\x1a\n\0\0", 10), std::string("{\"format\": 3}"),
        std::string("{\"format\": \"qforge-tuning\", \"version\": 1, \"generator_version\": ") +
            std::to_string(kGemmGeneratorVersion) + ", \"signature\": \"" + kSignature +
            "\", \"entries\": {}}"}) {
    TuningDbLoad loaded;
    EXPECT_NO_THROW(loaded = parse_tuning_db(text, kSignature, "db.json"));
    EXPECT_FALSE(loaded.db) << text;
    EXPECT_FALSE(loaded.error.empty());
  }
  test::ScratchDir dir;
  const TuningDbLoad missing = load_tuning_db(dir.path() / "absent.json", kSignature);
  EXPECT_FALSE(missing.db);
  EXPECT_NE(missing.error.find("cannot be read"), std::string::npos);
  const TuningDbLoad directory = load_tuning_db(dir.path(), kSignature);
  EXPECT_FALSE(directory.db);
}

TEST(TuningDb, EveryTruncationIsRejected) {
  std::string text = sample_db().to_json();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  int checked = 0;
  for (std::size_t length = 0; length < text.size(); length += 1 + length / 64) {
    const TuningDbLoad loaded = parse_tuning_db(text.substr(0, length), kSignature, "db.json");
    EXPECT_FALSE(loaded.db) << "truncated at " << length;
    ++checked;
  }
  EXPECT_GT(checked, 100);
  EXPECT_TRUE(parse_tuning_db(text, kSignature, "db.json").db);
}

TEST(TuningDb, InvalidEntriesAreDroppedWithAWarningAndTheRestKept) {
  TuningDb db(kSignature);
  const GemmKey key = shape(Isa::avx2, 256, 512, 512, 8, false, {}, MBucket::large);
  TunedKernel t;
  t.blocking = default_blocking(key);
  db.set(tuning_key_of(key, 2), t);
  const std::string good = db.to_json();
  const auto entry_at = good.find("{", good.find("\"entries\""));
  const auto entry_end = good.find("\n    }", entry_at) + 6;
  const std::string entry = good.substr(entry_at, entry_end - entry_at);

  auto with_change = [&](const std::string& from, const std::string& to) {
    std::string e = entry;
    replace_once(e, from, to);
    return e;
  };
  const std::string blocking = "\"mr\": " + std::to_string(t.blocking.mr);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {with_change(blocking, "\"mr\": 8"), "register budget"},  // 8 AVX2 rows never fit
      {with_change("\"isa\": \"avx2\"", "\"isa\": \"avx1024\""), "isa"},
      {with_change("\"isa\": \"avx2\"", "\"isa\": \"reference\""), "reference"},
      {with_change("\"bits\": 8", "\"bits\": 6"), "bits"},
      {with_change("\"n\": 256", "\"n\": \"many\""), "n: not an integer"},
      {with_change("\"n\": 256", "\"n\": 2e124"), "n: not an integer"},  // once undefined
      {with_change("\"bits\": 8", "\"bits\": 99999999999"), "bits: 99999999999 is outside"},
      {with_change("\"m_bucket\": \"ml\"", "\"m_bucket\": \"huge\""), "m_bucket"},
      {with_change("\"epilogue\": \"deq-f32\"", "\"epilogue\": \"deq-gelu-f32\""), "epilogue"},
      {with_change("\"threads\": 2", "\"threads\": 0"), "threads"},
      {with_change("\"g\": 512", "\"g\": 100"), "g must"},
      {with_change("\"bits\": 8", "\"bits\": 8, \"activation\": \"f16\""), "activation"},
  };
  for (const auto& [broken, says] : bad) {
    std::string text = good;
    replace_once(text, entry, entry + ",\n" + broken);
    const TuningDbLoad loaded = parse_tuning_db(text, kSignature, "db.json");
    ASSERT_TRUE(loaded.db) << loaded.error;
    EXPECT_EQ(loaded.db->size(), 1u) << broken;
    ASSERT_EQ(loaded.warnings.size(), 1u) << broken;
    EXPECT_NE(loaded.warnings[0].find(says), std::string::npos) << loaded.warnings[0];
    EXPECT_NE(loaded.warnings[0].find("entry 1"), std::string::npos) << loaded.warnings[0];
  }
}

TEST(TuningDb, SetRefusesABlockingThatDoesNotFit) {
  TuningDb db(kSignature);
  const GemmKey key = shape(Isa::avx2, 256, 512, 512, 8, false, {}, MBucket::large);
  TunedKernel t;
  t.blocking = Blocking{8, 8, 4, 0};
  ASSERT_FALSE(fits(key, t.blocking));
  EXPECT_THROW(db.set(tuning_key_of(key, 1), t), Error);
  EXPECT_EQ(db.size(), 0u);
}

TEST(TuningDb, DefaultPathFollowsXdgCacheHome) {
  const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string xdg_before = saved_xdg ? saved_xdg : "";
  setenv("XDG_CACHE_HOME", "/somewhere/cache", 1);
  EXPECT_EQ(default_tuning_path("sig"), "/somewhere/cache/qforge/tuning/sig.json");
  unsetenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (home && *home) {
    EXPECT_EQ(default_tuning_path("sig"),
              std::filesystem::path(home) / ".cache/qforge/tuning/sig.json");
  }
  if (saved_xdg) setenv("XDG_CACHE_HOME", xdg_before.c_str(), 1);
}

}  // namespace
}  // namespace qforge
