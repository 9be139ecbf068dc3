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
#include "model/format/ggml_quants.h"
#include "model/format/gguf_reader.h"
#include "model/runtime/model_session.h"
#include "model/runtime/quantized_gguf.h"
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

// Writes `bytes` to a scratch file and expects open_model to refuse it with a message
// holding `words` and the file's path.
void expect_open_refused(const std::vector<char>& bytes, const std::string& words) {
  const std::string path = temp_path("damaged.gguf");
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  try {
    open_model(path);
    ADD_FAILURE() << words << ": accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
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
                                                 : type == GgmlType::Q4_1 ? 3u
                                                 : type == GgmlType::Q5_0 ? 8u
                                                                          : 9u);
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
                         testing::Values("int8-g32", "int4-g32", "int4-g32-asym", "int5-g32",
                                         "int5-g32-asym"));

// Schemes no ggml type holds go in qforge's encoding (model/qforge_encoding.h): the file
// loads natively (and under its own scheme named) to the logits of quantizing the source at
// load, and every row decodes to the reference quantizer's values.
class EncodedGguf : public testing::TestWithParam<const char*> {};

TEST_P(EncodedGguf, LoadsToTheLogitsOfQuantizingAtLoadAndDecodesToTheReference) {
  const char* scheme = GetParam();
  const std::string in = temp_path(std::string("enc_in_") + scheme + ".gguf"),
                    out = temp_path(std::string("enc_out_") + scheme + ".gguf");
  test::TinyLlama spec;
  spec.dim = 64;
  spec.hidden_dim = 96;  // K = 96: a tail group for g64, padding for g128 and per-channel
  const auto weights = test::write_tiny_llama(in, spec);
  const QuantScheme q = parse_quant_scheme(scheme);
  const QuantizedFile file = write_quantized_gguf(
      open_model(in), precision_with(scheme, {parse_keep_rule("token_embd")}), out);
  EXPECT_LT(file.bytes, file.source_bytes);

  const Precision at_load = precision_with(
      scheme,
      {parse_keep_rule("token_embd"), parse_tensor_type_rule(std::string("output=") + scheme)});
  const std::vector<float> want = logits(in, at_load);
  EXPECT_EQ(logits(out, precision_with("native", {parse_keep_rule("token_embd")})), want);
  EXPECT_EQ(logits(out, at_load), want);  // the scheme named: the file's values as they are
  {
    auto session = open_session(out, parse_precision("native"), 1);
    for (const auto& [layer, choice] : session->model.weights.policy) {
      if (layer != "token_embd") {
        EXPECT_EQ(choice, to_string(q) + " (file)") << layer;
      }
    }
  }

  const GgufReader reader(out);
  EXPECT_EQ(reader.get_u32("qforge.encoding.version"), 1u);
  const ModelFile written = open_model(out);
  for (const TensorView& t : written.tensors()) {
    if (t.name == "token_embd.weight" || t.rows == 1) {
      EXPECT_EQ(t.type, GgmlType::F32) << t.name;
      EXPECT_FALSE(t.encoded) << t.name;
      continue;
    }
    ASSERT_TRUE(t.encoded) << t.name;
    EXPECT_EQ(reader.get_string("qforge.encoded." + t.name + ".scheme"), scheme);
    EXPECT_EQ(reader.find_tensor(t.name + ".zero") != nullptr, q.asymmetric) << t.name;
    // A per-tensor scale spans the fused q | k | v layer; the reference quantizes one
    // tensor, so compare the tensors that are a layer of their own.
    if (q.granularity == Granularity::per_tensor && t.name.find(".attn_") != std::string::npos &&
        t.name.find("attn_output") == std::string::npos)
      continue;
    const std::vector<float>& w = weights.at(t.name);
    const std::vector<float> ref = dequantize(quantize_reference(w.data(), t.rows, t.columns, q));
    std::vector<float> got(static_cast<std::size_t>(t.columns));
    for (std::int64_t r = 0; r < t.rows; ++r) {
      t.row_to_f32(r, got);
      for (std::int64_t i = 0; i < t.columns; ++i)
        ASSERT_EQ(got[i], ref[std::size_t(r * t.columns + i)])
            << t.name << " [" << r << "][" << i << "]";
    }
  }
  // Written again from the encoded file: the same bytes of every tensor.
  const std::string again = temp_path(std::string("enc_again_") + scheme + ".gguf");
  write_quantized_gguf(written, precision_with("native", {parse_keep_rule("token_embd")}), again);
  const GgufReader second(again);
  ASSERT_EQ(second.tensors().size(), reader.tensors().size());
  for (const GgufTensorInfo& info : reader.tensors()) {
    const GgufTensorInfo& other = second.tensor(info.name);
    const auto a = reader.raw_tensor_data(info), b = second.raw_tensor_data(other);
    ASSERT_EQ(a.size(), b.size()) << info.name;
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin())) << info.name;
  }
  std::filesystem::remove(in);
  std::filesystem::remove(out);
  std::filesystem::remove(again);
}

INSTANTIATE_TEST_SUITE_P(Schemes, EncodedGguf,
                         testing::Values("int8", "int4", "int8-asym", "int4-g128", "int8-g64",
                                         "int4-g64-asym", "int8-g16-asym", "int8-tensor", "int5",
                                         "int5-g64-asym"),
                         [](const testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// An int8 per-channel embedding is written in the encoding too and kept as the table's
// int8 form: the file computes what quantizing the whole model at load does.
TEST(EncodedGguf, Int8EverywhereMatchesQuantizingAtLoad) {
  const std::string in = temp_path("enc_all_in.gguf"), out = temp_path("enc_all_out.gguf");
  test::write_tiny_llama(in, test::TinyLlama{});
  write_quantized_gguf(open_model(in), parse_precision("int8"), out);
  EXPECT_TRUE(open_model(out).tensor("token_embd.weight").encoded);
  EXPECT_EQ(logits(out, parse_precision("native")), logits(in, parse_precision("int8")));
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

// A damaged encoded file is refused naming the file and the key or tensor.
TEST(EncodedGguf, RefusesADamagedFileNamingTheField) {
  const std::string in = temp_path("enc_bad_in.gguf"), out = temp_path("enc_bad_out.gguf");
  test::write_tiny_llama(in, test::TinyLlama{});
  write_quantized_gguf(open_model(in),
                       precision_with("int4-g64-asym", {parse_keep_rule("token_embd")}), out);
  std::vector<char> bytes;
  {
    std::ifstream f(out, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  std::size_t scale_at = 0, zero_at = 0;
  {
    const GgufReader reader(out);
    const auto at = [&](const std::string& name) {
      return static_cast<std::size_t>(reader.raw_tensor_data(reader.tensor(name)).data() -
                                      reader.file_data());
    };
    scale_at = at("blk.0.ffn_down.weight.scale");
    zero_at = at("blk.0.ffn_down.weight.zero");
  }
  const auto refused = expect_open_refused;
  const auto key_at = [&](const std::string& key) {
    const auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
    EXPECT_NE(it, bytes.end()) << key;
    return static_cast<std::size_t>(it - bytes.begin()) + key.size();
  };
  std::vector<char> version = bytes;
  version[key_at("qforge.encoding.version") + 4] = 2;  // after the u32 type id: the value
  refused(version, "encoding version 1");
  std::vector<char> scheme = bytes;
  const std::size_t s = key_at("qforge.encoded.blk.0.attn_q.weight.scheme") + 4 + 8;
  scheme[s + 3] = 'X';  // "int4-g64-asym" -> "int4X..."
  refused(scheme, "qforge.encoded.blk.0.attn_q.weight.scheme");
  std::vector<char> negative = bytes;
  negative[scale_at + 3] |= char(0x80);
  refused(negative, "'blk.0.ffn_down.weight.scale' row 0 group 0 holds the scale -");
  std::vector<char> zero = bytes;
  zero[zero_at] = char(16);
  refused(zero, "'blk.0.ffn_down.weight.zero' row 0 group 0 holds the zero point 16");
  std::vector<char> renamed = bytes;
  renamed[key_at("qforge.encoded.blk.0.attn_k.weight.scheme") - 15] = 'Q';  // blk.0.attn_Q
  refused(renamed, "names the tensor 'blk.0.attn_Q.weight'");
  std::filesystem::remove(in);
  std::filesystem::remove(out);
}

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
  const auto damaged = expect_open_refused;
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
  EXPECT_NE(message(precision_with("int4-g32", {parse_keep_rule("blk.0.attn_k")}))
                .find("one fused layer (blk.0.attn_qkv)"),
            std::string::npos);
  EXPECT_NE(
      message(precision_with("int4-g32", {parse_keep_rule("blk.9.*")})).find("names no tensor"),
      std::string::npos);
  EXPECT_NE(message(parse_precision("f32")).find("--keep"), std::string::npos);
  EXPECT_NE(message(precision_with("int4-g32-sb256-asym", {})).find("two-level scales"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  std::filesystem::remove(in);
}

}  // namespace
}  // namespace qforge
