// `quantize -o`: the file's blocks decode (by ggml's block definitions, model/ggml_quants)
// to exactly the values qforge's quantizer gives, and loading the file natively computes
// the same logits, bit for bit, as quantizing the source at load with the same policy.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "model/ggml_quants.h"
#include "model/gguf_reader.h"
#include "model/model_session.h"
#include "model/quantized_gguf.h"
#include "ops/quant/quantize.h"
#include "tests/model/tiny_llama.h"
#include "tests/support/temp_path.h"

namespace qforge {
namespace {

std::string temp_path(const std::string& name) {
  return test::temp_path("qgguf", name);
}

Precision precision_with(const char* quant, std::vector<TensorRule> rules) {
  Precision p = parse_precision(quant);
  p.rules = std::move(rules);
  return p;
}

std::vector<float> logits(const std::string& path, const Precision& precision) {
  auto session = open_session(path, precision, 2);
  const std::vector<int> tokens = {1, 4, 9, 16, 25, 36, 3};
  const std::span<const float> out = session->executor->forward(tokens, 0, true);
  return {out.begin(), out.end()};
}

class QuantizedGguf : public testing::TestWithParam<const char*> {};

TEST_P(QuantizedGguf, LoadsToTheLogitsOfQuantizingAtLoadAndDecodesAsGgmlBlocks) {
  const std::string in = temp_path("in.gguf"), out = temp_path("out.gguf");
  test::TinyLlama spec;
  spec.dim = 64;
  spec.hidden_dim = 96;
  const auto weights = test::write_tiny_llama(in, spec);
  const char* scheme = GetParam();
  const Precision writing = precision_with(scheme, {parse_keep_rule("token_embd")});
  const ModelFile source = open_model(in);
  const QuantizedFile file = write_quantized_gguf(source, writing, out);
  EXPECT_LT(file.bytes, file.source_bytes);

  // Quantizing at load with the same policy (the classifier too: at load it would be
  // int8 per-channel by default) gives the same floats as loading the file natively.
  const Precision at_load = precision_with(
      scheme,
      {parse_keep_rule("token_embd"), parse_tensor_type_rule(std::string("output=") + scheme)});
  // (A native load would quantize the file's f32 embedding to int8 rows: keep it in both.)
  EXPECT_EQ(logits(out, precision_with("native", {parse_keep_rule("token_embd")})),
            logits(in, at_load));

  const GgufReader reader(out);
  const QuantScheme q = parse_quant_scheme(scheme);
  const GgmlType type = *ggml_type_of(q);
  EXPECT_EQ(reader.get_string("qforge.quantize.quant"), scheme);
  EXPECT_EQ(reader.get_u32("general.file_type"), type == GgmlType::Q8_0   ? 7u
                                                 : type == GgmlType::Q4_0 ? 2u
                                                                          : 3u);
  EXPECT_EQ(reader.get_string_array("tokenizer.ggml.tokens").size(), std::size_t(spec.vocab));
  const ModelFile written = open_model(out);
  for (const TensorView& t : written.tensors()) {
    const std::vector<float>& w = weights.at(t.name);
    if (t.name == "token_embd.weight" || t.rows == 1) {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
      continue;
    }
    ASSERT_EQ(t.type, type) << t.name;
    const std::vector<float> want = dequantize(quantize_reference(w.data(), t.rows, t.columns, q));
    std::vector<float> got(static_cast<std::size_t>(t.columns));
    for (std::int64_t r = 0; r < t.rows; ++r) {
      dequantize_row(type, t.row(r), got);
      for (std::int64_t i = 0; i < t.columns; ++i)
        ASSERT_EQ(got[i], want[std::size_t(r * t.columns + i)])
            << t.name << " [" << r << "][" << i << "]";
    }
  }
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

INSTANTIATE_TEST_SUITE_P(Schemes, QuantizedGguf,
                         testing::Values("int8-g32", "int4-g32", "int4-g32-asym"));

// Static activation scales travel in the file's metadata: the written file loads with the
// scales it was written with and computes what the source does with them; a damaged
// value or layer name is refused naming the file and the key.
TEST(QuantizedGguf, CarriesStaticActivationScales) {
  const std::string in = temp_path("in_scales.gguf"), out = temp_path("out_scales.gguf");
  test::write_tiny_llama(in, test::TinyLlama{});
  const std::map<std::string, float> scales = {{"blk.0.attn_qkv", 0.02f},
                                               {"blk.1.ffn_down", 0.375f}};
  const auto set_scales = [&](ModelFile& file) {
    for (const auto& [layer, scale] : scales) file.set_activation_scale(layer, scale);
  };
  const ModelPreparer with_scales = [&](ModelFile& file, const Tokenizer&) { set_scales(file); };
  {
    ModelFile source = open_model(in);
    set_scales(source);
    write_quantized_gguf(source, parse_precision("int8-g32"), out);
  }
  const ModelFile written = open_model(out);
  EXPECT_EQ(written.activation_scales().size(), scales.size());
  for (const auto& [layer, scale] : scales) EXPECT_EQ(written.activation_scale(layer), scale);

  const std::vector<int> tokens = {1, 4, 9, 16, 25, 36, 3};
  auto from_file = open_session(out, parse_precision("native"), 2);
  auto at_load = open_session(in, parse_precision("int8-g32"), 2, 0, "", {}, with_scales);
  for (const auto& [layer, choice] : from_file->model.weights.policy)
    EXPECT_EQ(choice.ends_with(" static-act"), scales.count(layer) == 1) << layer << " " << choice;
  const std::span<const float> a = from_file->executor->forward(tokens, 0, true);
  const std::vector<float> want(a.begin(), a.end());
  const std::span<const float> b = at_load->executor->forward(tokens, 0, true);
  ASSERT_EQ(want.size(), b.size());
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(want[i], b[i]) << i;

  // Damage: the value negative, then the layer one the model lacks.
  std::vector<char> bytes;
  {
    std::ifstream f(out, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  const std::string key = "qforge.activation_scale.blk.0.attn_qkv";
  const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end()) - bytes.begin();
  ASSERT_LT(std::size_t(at), bytes.size());
  const auto damaged = [&](std::vector<char> copy, const std::string& words) {
    const std::string path = temp_path("damaged_scales.gguf");
    std::ofstream(path, std::ios::binary).write(copy.data(), std::streamsize(copy.size()));
    try {
      open_model(path);
      ADD_FAILURE() << words << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  };
  std::vector<char> negative = bytes;
  negative[std::size_t(at) + key.size() + 4 + 3] |= char(0x80);  // after the u32 type: f32 sign
  damaged(negative, "'" + key + "' = -0.0");
  std::vector<char> unknown = bytes;
  unknown[std::size_t(at) + key.size() - std::string("0.attn_qkv").size()] = '9';
  damaged(unknown, "names no linear layer");
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

TEST(QuantizedGgufErrors, RefusesWhatItCannotWriteAndLeavesNoFile) {
  const std::string in = temp_path("in_bad.gguf"), out = temp_path("out_bad.gguf");
  test::write_tiny_llama(in, test::TinyLlama{});
  const ModelFile source = open_model(in);
  auto message = [&](const Precision& p) {
    try {
      write_quantized_gguf(source, p, out);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(message(parse_precision("int4-g128")).find("int4-g128 has no ggml type"),
            std::string::npos);
  EXPECT_NE(message(parse_precision("int8")).find("has no ggml type"), std::string::npos);
  EXPECT_NE(message(precision_with("int4-g32", {parse_keep_rule("blk.0.attn_k")}))
                .find("one fused layer (blk.0.attn_qkv)"),
            std::string::npos);
  EXPECT_NE(
      message(precision_with("int4-g32", {parse_keep_rule("blk.9.*")})).find("names no tensor"),
      std::string::npos);
  EXPECT_NE(message(parse_precision("f32")).find("--keep"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  std::filesystem::remove(in);
}

}  // namespace
}  // namespace qforge
