// `quantize -o`: the file's blocks decode (by ggml's block definitions, model/ggml_quants)
// to exactly the values qforge's quantizer gives, and loading the file natively computes
// the same logits, bit for bit, as quantizing the source at load with the same policy.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
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
