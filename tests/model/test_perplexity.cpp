// Perplexity, KL divergence and top-1 agreement: the arithmetic against hand-computed
// cases, then the quantized precisions on the shipped models' evaluation texts.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/runtime/model_session.h"
#include "model/runtime/perplexity.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

// Logits that give every token of the vocabulary the same probability: PPL = vocab.
TEST(Perplexity, UniformLogitsGiveTheVocabularySize) {
  const int vocab = 37, ctx = 16;
  std::vector<int> tokens(3 * ctx + 5);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = int(i * 7 % vocab);
  std::vector<float> logits(std::size_t(ctx) * vocab, 0.25f);
  int calls = 0;
  const PerplexityResult r = evaluate_perplexity(
      tokens, ctx, vocab, 1,
      [&](std::span<const int> chunk) {
        EXPECT_EQ(chunk[0], 1);  // the first token of every chunk is BOS
        ++calls;
        return std::span<const float>(logits);
      },
      [&](std::span<const int>) { return std::span<const float>(logits); });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r.chunks, 3);
  EXPECT_EQ(r.scored_tokens, 3 * (ctx - 1 - ctx / 2));
  EXPECT_NEAR(r.perplexity, vocab, 1e-9 * vocab);
  EXPECT_NEAR(r.mean_kld, 0.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.top1_agreement, 1.0);
}

// Random logits against a direct float64 evaluation of the same definitions.
TEST(Perplexity, MatchesADirectEvaluation) {
  const int vocab = 11, ctx = 8, chunks = 4;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<int> tokens(std::size_t(chunks * ctx));
  for (int& t : tokens) t = token(rng);
  std::vector<std::vector<float>> model(chunks), reference(chunks);
  for (int c = 0; c < chunks; ++c) {
    model[c].resize(std::size_t(ctx) * vocab);
    reference[c].resize(model[c].size());
    for (float& x : model[c]) x = normal(rng);
    for (std::size_t i = 0; i < reference[c].size(); ++i)
      reference[c][i] = model[c][i] + 0.3f * normal(rng);
  }
  int chunk_model = 0, chunk_reference = 0;
  const PerplexityResult r = evaluate_perplexity(
      tokens, ctx, vocab, 1,
      [&](std::span<const int>) { return std::span<const float>(model[chunk_model++]); },
      [&](std::span<const int>) { return std::span<const float>(reference[chunk_reference++]); });

  double nll = 0, kld = 0;
  int same = 0, count = 0;
  for (int c = 0; c < chunks; ++c)
    for (int i = ctx / 2; i + 1 < ctx; ++i) {
      const auto log_probs = [&](const std::vector<float>& l) {
        std::vector<double> p(vocab);
        double z = 0;
        for (int v = 0; v < vocab; ++v) z += std::exp(double(l[std::size_t(i * vocab + v)]));
        for (int v = 0; v < vocab; ++v) p[v] = double(l[std::size_t(i * vocab + v)]) - std::log(z);
        return p;
      };
      const std::vector<double> q = log_probs(model[c]), p = log_probs(reference[c]);
      nll -= q[std::size_t(tokens[std::size_t(c * ctx + i + 1)])];
      for (int v = 0; v < vocab; ++v) kld += std::exp(p[v]) * (p[v] - q[v]);
      same += std::max_element(p.begin(), p.end()) - p.begin() ==
              std::max_element(q.begin(), q.end()) - q.begin();
      ++count;
    }
  EXPECT_EQ(r.scored_tokens, count);
  EXPECT_NEAR(r.mean_nll, nll / count, 1e-9);
  EXPECT_NEAR(r.perplexity, std::exp(nll / count), 1e-9 * r.perplexity);
  EXPECT_NEAR(r.mean_kld, kld / count, 1e-9);
  EXPECT_DOUBLE_EQ(r.top1_agreement, double(same) / count);
  EXPECT_GT(r.mean_kld, 0.0);
}

TEST(Perplexity, RejectsATextShorterThanOneChunk) {
  const std::vector<int> tokens(10, 2);
  EXPECT_THROW(evaluate_perplexity(tokens, 16, 4, 1,
                                   [](std::span<const int>) { return std::span<const float>(); }),
               Error);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Quality {
  const char* model;
  const char* text;
  const char* quant;
  double max_ppl_change;  // relative to f32
  double max_kld;
  double min_top1;
};

class QuantizedQuality : public testing::TestWithParam<Quality> {};

// The evaluation texts were sampled from the f32 models (tools/make_eval_texts).
TEST_P(QuantizedQuality, StaysCloseToF32) {
  const Quality& q = GetParam();
  const std::string model = test::model_path(q.model);
  const std::string text = read_file(std::string(QFORGE_SOURCE_ROOT) + "/tests/data/" + q.text);
  ASSERT_FALSE(text.empty());
  auto f32 = open_session(model, parse_precision("f32"), 1);
  auto quantized = open_session(model, parse_precision(q.quant), 1);
  const Tokenizer& tokenizer = f32->model.tokenizer;
  const std::vector<int> tokens = tokenizer.encode(text, true, false);
  const LlamaConfig& c = f32->model.weights.config;
  const int ctx = std::min(256, c.seq_len);
  const auto logits = [](LlamaExecutor& e) {
    return [&e](std::span<const int> chunk) { return e.forward(chunk, 0, true); };
  };
  const PerplexityResult r =
      evaluate_perplexity(tokens, ctx, c.vocab_size, tokenizer.bos_id(),
                          logits(*quantized->executor), logits(*f32->executor));
  const double change = r.perplexity / r.reference_perplexity - 1.0;
  std::printf("%s %s: PPL %.4f (f32 %.4f, %+.3f%%), KLD %.5f, top-1 %.2f%%\n", q.model, q.quant,
              r.perplexity, r.reference_perplexity, 100 * change, r.mean_kld,
              100 * r.top1_agreement);
  EXPECT_GE(r.chunks, 5);
  // Sampled from the model itself: the text is likely under it.
  EXPECT_LT(r.reference_perplexity, 6.0);
  EXPECT_LT(std::fabs(change), q.max_ppl_change);
  EXPECT_LT(r.mean_kld, q.max_kld);
  EXPECT_GT(r.top1_agreement, q.min_top1);
}

// int8 per-channel must stay within 1% of f32 perplexity, weight-only int8 (f32
// activations) within 0.5% and KLD 0.002; the others are bounded well above what they
// reach, to catch a broken path rather than to grade them.
INSTANTIATE_TEST_SUITE_P(
    ShippedModels, QuantizedQuality,
    testing::Values(
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "int8", 0.01, 0.01, 0.95},
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "int8-g32", 0.01, 0.01,
                0.95},
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "int4-g32", 0.25, 0.3, 0.7},
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "woq-int8", 0.005, 0.002,
                0.97},
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "woq-int4-g32-asym", 0.2,
                0.2, 0.75},
        Quality{"stories260K/stories260K.gguf", "stories260K_eval.txt", "int4-g128", 0.3, 0.35,
                0.7},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "int8", 0.01, 0.01, 0.95},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "int8-g32", 0.01, 0.01,
                0.95},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "int4-g32", 0.15, 0.15,
                0.8},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "woq-int8", 0.005, 0.002,
                0.97},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "woq-int4-g128", 0.25, 0.3,
                0.75},
        Quality{"babyllama-tok105/model5000.bin", "babyllama_eval.txt", "int4-g128", 0.25, 0.3,
                0.75}));

}  // namespace
}  // namespace qforge
