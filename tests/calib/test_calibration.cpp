// The calibration pass and its file: the block-at-a-time pass computes what forward()
// computes; the statistics match a float64 reference made from the inputs forward()
// feeds each layer; the file reads back exactly and refuses corruption, truncation,
// other versions and other models, naming the file and the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "calib/calibration_file.h"
#include "calib/calibrator.h"
#include "jit/base/error.h"
#include "model/runtime/model_session.h"
#include "tests/support/model_paths.h"
#include "tests/support/temp_path.h"

namespace qforge {
namespace {

std::string temp_path(const std::string& name) {
  return test::temp_path("calib", name);
}

std::string stories() {
  return test::model_path("stories260K/stories260K.gguf");
}

// Every input forward() hands to each linear layer, kept row by row.
class Capture final : public LinearInputObserver {
 public:
  void observe(int layer, LinearSite site, const float* x, int rows, int k) override {
    const std::string name = site == LinearSite::classifier
                                 ? "output"
                                 : "blk." + std::to_string(layer) + "." + site_name(site);
    auto& rows_of = inputs[name];
    rows_of.insert(rows_of.end(), x, x + static_cast<std::size_t>(rows) * k);
    widths[name] = k;
  }
  std::map<std::string, std::vector<float>> inputs;
  std::map<std::string, int> widths;
};

std::vector<std::vector<int>> random_chunks(int count, int ctx, int vocab, int bos, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> token(3, vocab - 1);
  std::vector<std::vector<int>> chunks(static_cast<std::size_t>(count));
  for (auto& c : chunks) {
    c.push_back(bos);
    for (int i = 1; i < ctx; ++i) c.push_back(token(rng));
  }
  return chunks;
}

// 200 tokens per chunk: a full 128-row block and a 72-row tail.
constexpr int kCtx = 200;

TEST(Calibration, BlockAtATimeComputesWhatForwardComputes) {
  for (const char* quant : {"f32", "int8"}) {
    auto session = open_session(stories(), parse_precision(quant), 2, kCtx);
    LlamaExecutor& ex = *session->executor;
    const LlamaConfig& c = session->model.weights.config;
    const auto chunk = random_chunks(1, kCtx, c.vocab_size, 1, 7)[0];
    const std::span<const float> whole = ex.forward(chunk, 0, /*all_logits=*/true);
    const std::vector<float> expected(whole.begin(), whole.end());
    std::vector<float> x(static_cast<std::size_t>(kCtx) * c.dim);
    ex.embed_rows(chunk, x.data());
    constexpr int kRows = LlamaExecutor::kChunkRows;
    for (int l = 0; l < c.n_layers; ++l)
      for (int p0 = 0; p0 < kCtx; p0 += kRows)
        ex.forward_block(l, x.data() + std::size_t(p0) * c.dim, std::min(kRows, kCtx - p0), p0);
    std::vector<float> logits(expected.size());
    for (int p0 = 0; p0 < kCtx; p0 += kRows)
      ex.forward_head(x.data() + std::size_t(p0) * c.dim, std::min(kRows, kCtx - p0),
                      logits.data() + std::size_t(p0) * c.vocab_size);
    EXPECT_EQ(logits, expected) << quant;
  }
}

// Inside block_done, the rerun computes the block from its inputs: for the first chunks
// (capped at the pass's), bit for bit what embed_rows and forward_block through blocks
// 0 .. l give each chunk, and the pass goes on unchanged after it.
TEST(Calibration, BlockRerunComputesTheBlockFromItsInputs) {
  auto session = open_session(stories(), parse_precision("f32"), 2, kCtx);
  LlamaExecutor& ex = *session->executor;
  const LlamaConfig& c = session->model.weights.config;
  const auto chunks = random_chunks(3, kCtx, c.vocab_size, 1, 9);
  std::vector<std::vector<float>> reruns, capped;
  std::vector<double> first_pass, with_reruns;
  const auto sums = [](std::vector<double>& into) {
    return [&into](const SiteStatistics& s) {
      double total = 0;
      for (double v : s.mean_abs) total += v;
      into.push_back(total);
    };
  };
  run_calibration(ex, c, chunks, false, sums(first_pass));
  run_calibration(ex, c, chunks, false, sums(with_reruns), {}, [&](int, const BlockRerun& rerun) {
    reruns.push_back(rerun(2));
    capped.push_back(rerun(50));
    return BlockStep::next;
  });
  EXPECT_EQ(with_reruns, first_pass) << "the reruns changed what the pass observes";
  ASSERT_EQ(reruns.size(), std::size_t(c.n_layers));
  constexpr int kRows = LlamaExecutor::kChunkRows;
  for (std::size_t s = 0; s < chunks.size(); ++s) {
    std::vector<float> x(static_cast<std::size_t>(kCtx) * c.dim);
    ex.embed_rows(chunks[s], x.data());
    for (int l = 0; l < c.n_layers; ++l) {
      for (int p0 = 0; p0 < kCtx; p0 += kRows)
        ex.forward_block(l, x.data() + std::size_t(p0) * c.dim, std::min(kRows, kCtx - p0), p0);
      const auto& all = capped[std::size_t(l)];
      ASSERT_EQ(all.size(), chunks.size() * x.size());
      EXPECT_TRUE(std::equal(x.begin(), x.end(), all.begin() + std::ptrdiff_t(s * x.size())))
          << "block " << l << " chunk " << s;
      if (s < 2) {
        ASSERT_EQ(reruns[std::size_t(l)].size(), 2 * x.size());
        EXPECT_TRUE(std::equal(x.begin(), x.end(),
                               reruns[std::size_t(l)].begin() + std::ptrdiff_t(s * x.size())))
            << "block " << l << " chunk " << s;
      }
    }
  }
}

// The file's statistics against float64 sums over the inputs forward() produced for the
// same chunks (a different route: whole chunks through every block).
TEST(Calibration, StatisticsMatchAFloat64ReferenceOfEveryLayerInput) {
  auto session = open_session(stories(), parse_precision("f32"), 2, kCtx);
  LlamaExecutor& ex = *session->executor;
  const LlamaConfig& c = session->model.weights.config;
  const auto chunks = random_chunks(3, kCtx, c.vocab_size, 1, 11);
  Capture capture;
  ex.set_observer(&capture);
  for (const auto& chunk : chunks) ex.forward(chunk, 0, /*all_logits=*/true);
  ex.set_observer(nullptr);

  const std::string path = temp_path("stats.qfcal");
  CalibrationSource source{"stories260K.gguf", "random", 3, kCtx, "f32", /*gram=*/true};
  const std::uint64_t count = 3 * kCtx;
  {
    CalibrationWriter writer(path, c, source, calibration_sites(c), count);
    run_calibration(ex, c, chunks, /*gram=*/true, [&](const SiteStatistics& s) { writer.add(s); });
    writer.commit();
  }
  const CalibrationFile file = CalibrationFile::open(path);
  ASSERT_EQ(file.sites().size(), std::size_t(4 * c.n_layers + 1));
  for (const CalibrationSite& site : file.sites()) {
    const std::vector<float>& x = capture.inputs.at(site.name);
    const int k = capture.widths.at(site.name);
    ASSERT_EQ(site.k, k) << site.name;
    ASSERT_EQ(site.count, count);
    ASSERT_EQ(x.size(), count * static_cast<std::size_t>(k)) << site.name;
    double worst_gram = 0, gram_scale = 0;
    for (int i = 0; i < k; ++i) {
      double absmax = 0, sum_abs = 0, sum_sq = 0;
      for (std::uint64_t t = 0; t < count; ++t) {
        const double v = x[t * k + i];
        absmax = std::max(absmax, std::abs(v));
        sum_abs += std::abs(v);
        sum_sq += v * v;
      }
      EXPECT_EQ(site.absmax[i], static_cast<float>(absmax)) << site.name << " channel " << i;
      EXPECT_NEAR(site.mean_abs[i], sum_abs / count, 1e-12 * (1 + sum_abs)) << site.name;
      EXPECT_NEAR(site.mean_sq[i], sum_sq / count, 1e-12 * (1 + sum_sq)) << site.name;
      for (int j = 0; j < k; j += 7) {  // a sample of each row of the Gram matrix
        double g = 0;
        for (std::uint64_t t = 0; t < count; ++t) g += double(x[t * k + i]) * x[t * k + j];
        g /= count;
        worst_gram = std::max(worst_gram, std::abs(site.gram[std::size_t(i) * k + j] - g));
        gram_scale = std::max(gram_scale, std::abs(g));
      }
    }
    // One batch's sums are f32 (<= 2048 terms): relative error well under 1e-4.
    EXPECT_LT(worst_gram, 1e-4 * gram_scale) << site.name;
    EXPECT_GT(site.outlier_ratio(), 1.0);
  }
  std::filesystem::remove(path);
}

class CalibrationFileTest : public testing::Test {
 protected:
  void SetUp() override {
    session_ = open_session(stories(), parse_precision("f32"), 1, 64);
    config_ = session_->model.weights.config;
    path_ = temp_path("file.qfcal");
    const auto chunks = random_chunks(2, 64, config_.vocab_size, 1, 3);
    CalibrationSource source{"stories260K.gguf", "random", 2, 64, "f32", false};
    CalibrationWriter writer(path_, config_, source, calibration_sites(config_), 128);
    run_calibration(*session_->executor, config_, chunks, false,
                    [&](const SiteStatistics& s) { writer.add(s); });
    writer.commit();
    std::ifstream in(path_, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), {});
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // The message of opening `bytes` as a file.
  std::string open_error(const std::string& bytes) {
    const std::string bad = temp_path("bad.qfcal");
    std::ofstream(bad, std::ios::binary) << bytes;
    std::string message = "(no error)";
    try {
      CalibrationFile::open(bad);
    } catch (const Error& e) {
      message = e.what();
    }
    std::filesystem::remove(bad);
    return message;
  }
  // Replaces the first `from` in the header with `to` (same length keeps the payload).
  std::string edited(const std::string& from, const std::string& to) {
    std::string b = bytes_;
    const std::size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) b.replace(at, from.size(), to);
    return b;
  }

  std::unique_ptr<ModelSession> session_;
  LlamaConfig config_;
  std::string path_;
  std::string bytes_;
};

TEST_F(CalibrationFileTest, ReadsBackAndChecksTheModel) {
  const CalibrationFile file = CalibrationFile::open(path_);
  EXPECT_EQ(file.source().samples, 2);
  EXPECT_EQ(file.source().ctx, 64);
  EXPECT_FALSE(file.source().gram);
  EXPECT_TRUE(file.site("blk.0.ffn_down").gram.empty());
  EXPECT_EQ(file.site("blk.0.ffn_down").k, config_.hidden_dim);
  EXPECT_NO_THROW(file.check_model(config_, "stories260K.gguf"));
  LlamaConfig other = config_;
  other.hidden_dim += 4;
  try {
    file.check_model(other, "other.gguf");
    ADD_FAILURE() << "another model accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'model.hidden_dim'"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("other.gguf"), std::string::npos);
  }
  EXPECT_THROW(file.site("blk.9.ffn_down"), Error);
}

TEST_F(CalibrationFileTest, RefusesDamageNamingTheField) {
  auto expect = [&](const std::string& bytes, const std::string& words) {
    const std::string message = open_error(bytes);
    EXPECT_NE(message.find(words), std::string::npos) << message;
    EXPECT_NE(message.find("bad.qfcal"), std::string::npos) << message;
  };
  std::string flipped = bytes_;
  flipped[bytes_.size() - 100] ^= 0x10;  // inside the classifier's statistics
  expect(flipped, "site output fails its checksum");
  expect(bytes_.substr(0, bytes_.size() - 64), "outside the file");
  expect(bytes_.substr(0, 10), "magic");
  std::string version = bytes_;
  version[8] = 2;
  expect(version, "version 2");
  expect(edited("\"dim\":64", "\"dim\":\"x\""), "field 'model.dim' is not an integer");
  expect(edited("\"samples\":2", "\"sample\":2 "), "field 'source.samples' missing");
  expect(edited("\"name\":\"blk.0.attn_output\"", "\"name\":\"blk.0.attn_outpux\""),
         "field 'sites[1].name'");
  expect(edited("{\"format\"", "[\"format\""), "header is not JSON");
}

TEST(CalibrationWriter, LeavesNothingBehindWithoutCommit) {
  const std::string path = temp_path("never.qfcal");
  LlamaConfig c;
  c.dim = 8;
  c.hidden_dim = 16;
  c.n_layers = 1;
  {
    CalibrationWriter writer(path, c, CalibrationSource{}, calibration_sites(c), 4);
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
    SiteStatistics wrong;
    wrong.name = "blk.0.ffn_down";
    wrong.k = 16;
    EXPECT_THROW(writer.add(wrong), Error);  // blk.0.attn_qkv comes first
    EXPECT_THROW(writer.commit(), Error);    // sites missing
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(CalibrationChunks, SplitTheTextAfterBosAndRefuseAShortOne) {
  std::vector<int> tokens = {1};
  for (int i = 0; i < 25; ++i) tokens.push_back(100 + i);
  const auto chunks = calibration_chunks(tokens, 10, 9, 1, "t.txt");
  ASSERT_EQ(chunks.size(), 3u);  // 25 tokens after BOS: three chunks of 8
  EXPECT_EQ(chunks[1], (std::vector<int>{1, 108, 109, 110, 111, 112, 113, 114, 115}));
  EXPECT_EQ(calibration_chunks(tokens, 2, 9, 1, "t.txt").size(), 2u);
  try {
    calibration_chunks(tokens, 1, 64, 1, "t.txt");
    ADD_FAILURE() << "a short text accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.txt"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge
