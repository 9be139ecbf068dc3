// The mixed-precision policy: glob rules over GGUF tensor names, presets, the checks on
// a policy, and that a policy reaching a configuration by another route computes the
// same logits bit for bit.
#include <gtest/gtest.h>

#include <unistd.h>
#include <filesystem>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "model/runtime/model_session.h"
#include "model/runtime/tensor_policy.h"
#include "tests/model/tiny_llama.h"
#include "tests/support/temp_path.h"

namespace qforge {
namespace {

std::string temp_path(const std::string& name) {
  return test::temp_path("policy", name);
}

TEST(TensorPattern, GlobsOverWholeNames) {
  EXPECT_TRUE(tensor_pattern_matches("blk.*.ffn_down", "blk.12.ffn_down"));
  EXPECT_TRUE(tensor_pattern_matches("blk.*.ffn_down", "blk.12.ffn_down.weight"));
  EXPECT_TRUE(tensor_pattern_matches("blk.*.ffn_down.weight", "blk.0.ffn_down"));
  EXPECT_TRUE(tensor_pattern_matches("*", "output"));
  EXPECT_TRUE(tensor_pattern_matches("blk.?.attn_*", "blk.3.attn_output"));
  EXPECT_TRUE(tensor_pattern_matches("*down", "blk.1.ffn_down"));
  EXPECT_TRUE(tensor_pattern_matches("blk.1*.*", "blk.17.ffn_up"));
  EXPECT_FALSE(tensor_pattern_matches("blk.?.attn_*", "blk.13.attn_q"));
  EXPECT_FALSE(tensor_pattern_matches("blk.*.ffn_down", "blk.1.ffn_up"));
  EXPECT_FALSE(tensor_pattern_matches("output", "output_norm"));
  EXPECT_FALSE(tensor_pattern_matches("blk.1", "blk.12.ffn_up"));
  EXPECT_FALSE(tensor_pattern_matches("", "output"));
}

TEST(TensorRule, ParsesAndRejectsEachForm) {
  const TensorRule t = parse_tensor_type_rule("blk.*.ffn_down.weight=int4-g32-asym");
  EXPECT_EQ(t.pattern, "blk.*.ffn_down");
  EXPECT_EQ(to_string(t.choice), "int4-g32-asym");
  EXPECT_EQ(parse_tensor_type_rule("output=bf16").choice.kind, TensorChoice::Kind::bf16);
  EXPECT_EQ(parse_tensor_type_rule("blk.0.*=native").choice.kind, TensorChoice::Kind::native);
  EXPECT_EQ(parse_keep_rule("output").choice.kind, TensorChoice::Kind::f32);
  EXPECT_EQ(parse_keep_rule("output=bf16").choice.kind, TensorChoice::Kind::bf16);
  for (const char* bad : {"blk.0.ffn_down", "=int8", "output=", "output=int6", "x=int4-g7"})
    EXPECT_THROW(parse_tensor_type_rule(bad), Error) << bad;
  EXPECT_THROW(parse_keep_rule("output=int8"), Error);
  EXPECT_THROW(preset_rules("no-such-preset"), Error);
  // The last matching rule decides; flags written back reproduce the rules.
  std::vector<TensorRule> rules = {parse_keep_rule("*"),
                                   parse_tensor_type_rule("blk.3.ffn_down=int8")};
  EXPECT_EQ(deciding_rule(rules, "blk.3.ffn_down")->choice.kind, TensorChoice::Kind::quantized);
  EXPECT_EQ(deciding_rule(rules, "blk.4.ffn_down")->choice.kind, TensorChoice::Kind::f32);
  EXPECT_EQ(rules_as_flags(rules), "--keep * --tensor-type blk.3.ffn_down=int8");
  EXPECT_EQ(deciding_rule({}, "output"), nullptr);
}

class PolicyModel : public testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path("model.gguf");
    test::write_tiny_llama(path_, test::TinyLlama{});
  }
  void TearDown() override { std::filesystem::remove(path_); }

  static Precision with_rules(const char* quant, const std::vector<TensorRule>& rules) {
    Precision p = parse_precision(quant);
    p.rules = rules;
    return p;
  }
  std::vector<float> logits(const Precision& precision, int threads = 2) {
    auto session = open_session(path_, precision, threads);
    const std::vector<int> tokens = {1, 7, 3, 22, 9};
    const std::span<const float> out = session->executor->forward(tokens, 0, true);
    return {out.begin(), out.end()};
  }
  std::string summary(const Precision& precision) {
    return policy_summary(open_session(path_, precision, 1)->model.weights);
  }

  std::string path_;
};

// An f32 model whose rules ask for int8 everywhere is the int8 model, and an int8 model
// whose rules keep everything f32 is the f32 model: the same floats either way.
TEST_F(PolicyModel, RulesReachTheUniformModelsExactly) {
  const std::vector<float> int8 = logits(parse_precision("int8"));
  EXPECT_EQ(logits(with_rules("f32", {parse_tensor_type_rule("*=int8")})), int8);
  const std::vector<float> f32 = logits(parse_precision("f32"));
  EXPECT_EQ(logits(with_rules("int8", {parse_keep_rule("*")})), f32);
  EXPECT_NE(int8, f32);
  const std::vector<float> g32 = logits(parse_precision("int4-g32"));
  EXPECT_EQ(logits(with_rules("int8", {parse_tensor_type_rule("blk.*=int4-g32")})), g32);
}

// One layer quantized in an f32 model: only that layer runs the JIT kernels, the logits
// move off f32, and the summary names the block.
TEST_F(PolicyModel, OneLayerQuantizedInAnF32Model) {
  const Precision p = with_rules("f32", {parse_tensor_type_rule("blk.1.ffn_down=int4-g32")});
  auto session = open_session(path_, p, 1);
  const LlamaWeights& w = session->model.weights;
  EXPECT_TRUE(w.layers[1].down->kernel_key(1).has_value());
  EXPECT_FALSE(w.layers[0].down->kernel_key(1).has_value());
  EXPECT_FALSE(w.layers[1].wqkv->kernel_key(1).has_value());
  EXPECT_FALSE(w.classifier->kernel_key(1).has_value());
  EXPECT_EQ(policy_summary(w),
            "token_embd f32, attn_qkv f32 x2, attn_output f32 x2, ffn_gate_up f32 x2, "
            "ffn_down f32 x1 + int4-g32 x1 (blk.1), output f32");
  EXPECT_NE(logits(p), logits(parse_precision("f32")));
}

TEST_F(PolicyModel, PresetsKeepTheEnds) {
  EXPECT_EQ(summary(with_rules("int4-g32", preset_rules("keep-ends"))),
            "token_embd f32, attn_qkv int4-g32 x2, attn_output int4-g32 x2, ffn_gate_up "
            "int4-g32 x2, ffn_down int4-g32 x2, output f32");
  EXPECT_EQ(summary(with_rules("int4-g32", preset_rules("keep-ends-bf16"))),
            "token_embd f32, attn_qkv int4-g32 x2, attn_output int4-g32 x2, ffn_gate_up "
            "int4-g32 x2, ffn_down int4-g32 x2, output bf16");
  EXPECT_EQ(summary(with_rules("int4-g32", preset_rules("down-int8"))),
            "token_embd int8, attn_qkv int4-g32 x2, attn_output int4-g32 x2, ffn_gate_up "
            "int4-g32 x2, ffn_down int8 x2, output int8");
}

// Each bad policy fails before anything is converted, naming the flag or the tensors.
TEST_F(PolicyModel, BadPoliciesNameWhatIsWrong) {
  auto message = [&](const std::vector<TensorRule>& rules) {
    try {
      open_session(path_, with_rules("int8", rules), 1);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message({parse_tensor_type_rule("blk.7.ffn_down=int8")})
                .find("--tensor-type blk.7.ffn_down=int8: the pattern 'blk.7.ffn_down' names no "
                      "tensor"),
            std::string::npos);
  EXPECT_NE(message({parse_keep_rule("blk.0.attn_v")})
                .find("blk.0.attn_q gets int8 but blk.0.attn_v gets f32; they are one fused "
                      "layer (blk.0.attn_qkv)"),
            std::string::npos);
  EXPECT_NE(message({parse_tensor_type_rule("blk.1.ffn_up=int4-g32")}).find("blk.1.ffn_gate_up"),
            std::string::npos);
  EXPECT_NE(message({parse_tensor_type_rule("token_embd=int4-g32")})
                .find("token_embd cannot be int4-g32"),
            std::string::npos);
  EXPECT_NE(message({parse_tensor_type_rule("token_embd=bf16")}).find("token_embd cannot be bf16"),
            std::string::npos);
  // Norms are not the policy's: a pattern naming only them names no tensor.
  EXPECT_NE(message({parse_keep_rule("blk.*.attn_norm")}).find("names no tensor"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge
