// The per-layer report on stories260K: its whole-model KLD is perplexity's, one layer's
// sensitivity is the KLD of a model built by the policy with only that layer quantized,
// the f32 model comes back unchanged, a layer kept f32 costs nothing, and two runs rank
// the layers the same.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "calib/quant_report.h"
#include "model/runtime/model_session.h"
#include "model/runtime/perplexity.h"
#include "tests/support/model_paths.h"
#include "tests/support/test_data.h"

namespace qforge {
namespace {

constexpr int kCtx = 128, kChunks = 6;

std::string stories() {
  return test::model_path("stories260K/stories260K.gguf");
}

std::vector<int> eval_tokens(const ModelSession& s) {
  return s.model.tokenizer.encode(test::read_test_data("stories260K_eval.txt"), true, false);
}

Precision with_rules(const char* quant, std::vector<TensorRule> rules) {
  Precision p = parse_precision(quant);
  p.rules = std::move(rules);
  return p;
}

// Mean KLD of `model` from `reference` over the report's chunks, by perplexity's route.
double kld(ModelSession& model, ModelSession& reference, const std::vector<int>& tokens) {
  const std::span<const int> text(tokens.data(), kChunks * kCtx);
  auto logits = [](ModelSession& s) {
    return [&s](std::span<const int> chunk) { return s.executor->forward(chunk, 0, true); };
  };
  return evaluate_perplexity(text, kCtx, model.model.weights.config.vocab_size,
                             model.model.tokenizer.bos_id(), logits(model), logits(reference))
      .mean_kld;
}

TEST(QuantReport, AgreesWithModelsBuiltByThePolicy) {
  const Precision int4 = with_rules("int4-g32", {parse_keep_rule("blk.1.attn_output")});
  auto f32 = open_session(stories(), parse_precision("f32"), 2, kCtx);
  auto quantized = open_session(stories(), int4, 2, kCtx);
  const std::vector<int> tokens = eval_tokens(*f32);
  const std::vector<int> chunk(tokens.begin(), tokens.begin() + kCtx);
  const std::span<const float> before_span = f32->executor->forward(chunk, 0, true);
  const std::vector<float> before(before_span.begin(), before_span.end());

  QuantReportOptions options;
  options.ctx = kCtx;
  options.max_chunks = kChunks;
  const QuantReport report = make_quant_report(*f32, *quantized, tokens, options, 2);
  ASSERT_EQ(report.layers.size(), 21u);
  EXPECT_EQ(report.chunks, kChunks);

  // The f32 model is itself again.
  const std::span<const float> after = f32->executor->forward(chunk, 0, true);
  EXPECT_EQ(std::vector<float>(after.begin(), after.end()), before);

  auto reference = open_session(stories(), parse_precision("f32"), 2, kCtx);
  EXPECT_DOUBLE_EQ(report.full_kld, kld(*quantized, *reference, tokens));
  for (const LayerQuantReport& l : report.layers) {
    if (l.name == "blk.1.attn_output") {  // kept f32 by the policy
      EXPECT_EQ(l.scheme, "f32");
      EXPECT_EQ(l.sensitivity_kld, 0.0);
      EXPECT_EQ(l.weight_rel_rms, 0.0);
      EXPECT_EQ(l.output_rel_rms, 0.0);
      continue;
    }
    EXPECT_GT(l.sensitivity_kld, 0.0) << l.name;
    EXPECT_GT(l.weight_rel_rms, 0.0) << l.name;
    EXPECT_GT(l.output_rel_rms, 0.0) << l.name;
    EXPECT_GT(l.activation_rel_rms, 0.0) << l.name;
    EXPECT_GE(l.outlier_ratio, 1.0) << l.name;
    EXPECT_LT(l.quantized_bytes, l.f32_bytes) << l.name;
  }
  // Two layers' sensitivities against models quantized in that layer only.
  for (const std::string& name : {std::string("blk.3.ffn_gate_up"), std::string("output")}) {
    std::vector<TensorRule> rules = {parse_keep_rule("*")};
    const std::string scheme = name == "output" ? "int8" : "int4-g32";
    for (const std::string& pattern : layer_tensor_patterns(name))
      rules.push_back(parse_tensor_type_rule(pattern + "=" + scheme));
    auto one = open_session(stories(), with_rules("f32", rules), 2, kCtx);
    const auto it = std::find_if(report.layers.begin(), report.layers.end(),
                                 [&](const LayerQuantReport& l) { return l.name == name; });
    ASSERT_NE(it, report.layers.end());
    EXPECT_DOUBLE_EQ(it->sensitivity_kld, kld(*one, *reference, tokens)) << name;
  }

  // Run again: the same figures, so the same ranking.
  const QuantReport again = make_quant_report(*f32, *quantized, tokens, options, 2);
  for (std::size_t i = 0; i < report.layers.size(); ++i)
    EXPECT_EQ(again.layers[i].sensitivity_kld, report.layers[i].sensitivity_kld)
        << report.layers[i].name;
}

TEST(QuantReport, LayerPatternsNameTheFusedTensors) {
  EXPECT_EQ(layer_tensor_patterns("blk.12.attn_qkv"),
            (std::vector<std::string>{"blk.12.attn_q", "blk.12.attn_k", "blk.12.attn_v"}));
  EXPECT_EQ(layer_tensor_patterns("blk.0.ffn_gate_up"),
            (std::vector<std::string>{"blk.0.ffn_gate", "blk.0.ffn_up"}));
  EXPECT_EQ(layer_tensor_patterns("blk.3.ffn_down"), (std::vector<std::string>{"blk.3.ffn_down"}));
  EXPECT_EQ(layer_tensor_patterns("output"), (std::vector<std::string>{"output"}));
}

}  // namespace
}  // namespace qforge
