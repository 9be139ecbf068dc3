// Synthetic models: presets, the spec-exact file they give, their weight statistics, and
// determinism (the same seed gives the same bytes).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/runtime/chat_format.h"
#include "model/runtime/model_session.h"
#include "model/runtime/synthetic_model.h"

namespace qforge {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("qforge_synth_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Synthetic, PresetsHaveThePublishedShapes) {
  const LlamaConfig tiny = synthetic_preset("tinyllama-1.1b");
  EXPECT_EQ(tiny.dim, 2048);
  EXPECT_EQ(tiny.hidden_dim, 5632);
  EXPECT_EQ(tiny.n_layers, 22);
  EXPECT_EQ(tiny.n_heads, 32);
  EXPECT_EQ(tiny.n_kv_heads, 4);
  EXPECT_EQ(tiny.vocab_size, 32000);
  const LlamaConfig llama = synthetic_preset("llama2-7b");
  EXPECT_EQ(llama.dim, 4096);
  EXPECT_EQ(llama.hidden_dim, 11008);
  EXPECT_EQ(llama.n_layers, 32);
  const LlamaConfig dims =
      synthetic_preset("dim=256,hidden=704,layers=3,heads=8,kv-heads=2,vocab=600");
  EXPECT_EQ(dims.kv_dim(), 64);
  EXPECT_THROW(synthetic_preset("bogus"), Error);
  EXPECT_THROW(synthetic_preset("dim=256,hidden=704"), Error);
  EXPECT_THROW(synthetic_preset("dim=-3,hidden=704,layers=1,heads=8,vocab=600"), Error);
  EXPECT_THROW(synthetic_preset("dim=250,hidden=704,layers=1,heads=8,vocab=600"), Error);
  EXPECT_THROW(parse_synthetic_type("q5_k"), Error);
}

class SyntheticTypes : public testing::TestWithParam<const char*> {};

TEST_P(SyntheticTypes, WritesALoadableModelWithTheRequestedStatistics) {
  SyntheticModelSpec spec;
  spec.name = "test";
  spec.config = synthetic_preset("dim=128,hidden=352,layers=2,heads=4,kv-heads=2,vocab=300,ctx=64");
  spec.type = parse_synthetic_type(GetParam());
  spec.seed = 5;
  const std::string path = temp_path(std::string(GetParam()) + ".gguf");
  write_synthetic_model(spec, path);
  const ModelFile file = open_model(path);
  EXPECT_EQ(file.config().dim, 128);
  EXPECT_EQ(file.config().n_kv_heads, 2);
  EXPECT_EQ(file.config().vocab_size, 300);
  EXPECT_FALSE(file.config().tied_embedding);
  const TensorView& w = file.layer_tensor(1, "ffn_down");
  EXPECT_EQ(w.type, spec.type);
  double sum = 0, squares = 0;
  std::vector<float> row(static_cast<std::size_t>(w.columns));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    w.row_to_f32(r, row);
    for (float x : row) sum += x, squares += double(x) * x;
  }
  const double count = double(w.rows * w.columns);
  EXPECT_NEAR(sum / count, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(squares / count), 0.02, 0.002);
  const TensorView& norm = file.layer_tensor(0, "attn_norm");
  file.layer_tensor(0, "attn_norm").row_to_f32(0, std::span<float>(row.data(), 128));
  EXPECT_EQ(norm.type, GgmlType::F32);
  EXPECT_EQ(row[0], 1.0f);
  // It runs, and its placeholder vocabulary encodes any text (byte fallback).
  auto session = open_session(path, parse_precision("int8"), 1);
  const std::vector<int> tokens = session->model.tokenizer.encode("héllo\n", true, false);
  EXPECT_GT(tokens.size(), 3u);
  const std::span<const float> logits = session->executor->forward(tokens, 0);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticTypes,
                         testing::Values("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1"));

// The llama3 style: Llama 3's vocabulary layout (byte-level BPE, the specials at 128000..),
// its chat template, a tied embedding and Llama 3.1's RoPE frequency factors.
TEST(Synthetic, Llama3StyleLoadsAsLlama3Does) {
  const SyntheticModelSpec preset = synthetic_spec("llama3.2-1b");
  EXPECT_EQ(preset.style, SyntheticStyle::Llama3);
  EXPECT_EQ(preset.config.vocab_size, 128256);
  EXPECT_EQ(synthetic_spec("tinyllama-1.1b").style, SyntheticStyle::Llama2);
  SyntheticModelSpec spec = synthetic_spec(
      "dim=128,hidden=256,layers=1,heads=2,kv-heads=1,vocab=128256,ctx=64,style=llama3");
  ASSERT_EQ(spec.style, SyntheticStyle::Llama3);
  const std::string path = temp_path("llama3.gguf");
  write_synthetic_model(spec, path);
  auto session = open_session(path, parse_precision("int8"), 1);
  const LoadedModel& model = session->model;
  const Tokenizer& t = model.tokenizer;
  EXPECT_EQ(t.model(), TokenizerModel::ByteLevelBpe);
  EXPECT_EQ(t.bos_id(), 128000);
  EXPECT_TRUE(t.ends_generation(128009));  // <|eot_id|>
  EXPECT_TRUE(t.adds_bos());
  // No merges: each byte is a token; special tokens in a prompt are tokens.
  EXPECT_EQ(t.encode_prompt("h\xc3\xa9<|eot_id|>"),
            (std::vector<int>{128000, 'h', 0xc3, 0xa9, 128009}));
  EXPECT_EQ(chat_format_for(model.chat_template, t), ChatFormat::Llama3);
  const LlamaConfig& c = model.weights.config;
  EXPECT_TRUE(c.tied_embedding);
  ASSERT_EQ(c.rope_freq_factors.size(), 32u);    // head 64: 32 pairs
  EXPECT_EQ(c.rope_freq_factors.front(), 1.0f);  // the fastest pair kept
  EXPECT_EQ(c.rope_freq_factors.back(), 32.0f);  // the slowest slowed by the factor
  const std::vector<int> tokens = t.encode_prompt("hi");
  for (float x : session->executor->forward(tokens, 0)) ASSERT_TRUE(std::isfinite(x));
  std::filesystem::remove(path);
}

TEST(Synthetic, SameSeedSameBytesOtherSeedOtherWeights) {
  SyntheticModelSpec spec;
  spec.config = synthetic_preset("dim=64,hidden=128,layers=1,heads=4,vocab=300,ctx=32");
  spec.seed = 9;
  const std::string a = temp_path("a.gguf"), b = temp_path("b.gguf"), c = temp_path("c.gguf");
  write_synthetic_model(spec, a);
  write_synthetic_model(spec, b);
  spec.seed = 10;
  write_synthetic_model(spec, c);
  EXPECT_EQ(bytes_of(a), bytes_of(b));
  EXPECT_NE(bytes_of(a), bytes_of(c));
  EXPECT_EQ(bytes_of(a).size(), bytes_of(c).size());
  for (const auto& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(Synthetic, AFailedWriteLeavesNothingBehind) {
  SyntheticModelSpec spec;
  spec.config = synthetic_preset("dim=64,hidden=128,layers=1,heads=4,vocab=300");
  const std::string path = "/nonexistent-dir/model.gguf";
  EXPECT_THROW(write_synthetic_model(spec, path), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
  spec.type = GgmlType::Q8_0;
  spec.config = synthetic_preset("dim=48,hidden=96,layers=1,heads=4,vocab=300");
  const std::string odd = temp_path("odd.gguf");
  EXPECT_THROW(write_synthetic_model(spec, odd), Error);  // 48 is not whole Q8_0 blocks
  EXPECT_FALSE(std::filesystem::exists(odd));
}

}  // namespace
}  // namespace qforge
