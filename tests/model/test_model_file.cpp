// The common model view: configs of the shipped models (values from their PROVENANCE.md),
// GGUF == llama2.c bit for bit, format detection, and the shape/config checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "model/format/ggml_quants.h"
#include "model/format/model_file.h"
#include "tests/model/model_test_util.h"
#include "tests/model/tiny_llama.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

using test::expect_error;

TEST(Stories260K, GgufFileFacts) {
  const GgufReader gguf(test::model_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(gguf.version(), 3u);
  EXPECT_EQ(gguf.file_size(), 1185376u);
  EXPECT_EQ(gguf.alignment(), 32u);
  EXPECT_EQ(gguf.metadata().size(), 19u);
  EXPECT_EQ(gguf.tensors().size(), 48u);
  EXPECT_EQ(gguf.get_string("general.architecture"), "llama");
  EXPECT_EQ(gguf.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(gguf.get_u32("llama.context_length"), 2048u);
  EXPECT_EQ(gguf.get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(gguf.get_array_size("tokenizer.ggml.tokens"), 512u);
  const GgufTensorInfo& embedding = gguf.tensor("token_embd.weight");
  EXPECT_EQ(embedding.type, GgmlType::F32);
  EXPECT_EQ(embedding.n_dims, 2u);
  EXPECT_EQ(embedding.dims[0], 64u);   // columns (dim)
  EXPECT_EQ(embedding.dims[1], 512u);  // rows (vocab)
  // The last tensor ends exactly at the end of the file.
  const GgufTensorInfo& last = gguf.tensors().back();
  EXPECT_EQ(gguf.data_offset() + last.offset + last.byte_size, gguf.file_size());
  for (const GgufTensorInfo& info : gguf.tensors()) EXPECT_EQ(info.type, GgmlType::F32);
}

void expect_stories260k_shape(const LlamaConfig& c) {
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.kv_dim(), 32);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_EQ(c.rms_eps, 1e-5f);
  EXPECT_EQ(c.rope_theta, 10000.0f);
}

TEST(Stories260K, ConfigFromBothFiles) {
  const ModelFile bin = open_model(test::model_path("stories260K/stories260K.bin"));
  EXPECT_EQ(bin.format(), ModelFormat::Llama2c);
  expect_stories260k_shape(bin.config());
  EXPECT_EQ(bin.config().seq_len, 512);
  EXPECT_TRUE(bin.config().tied_embedding);
  EXPECT_EQ(bin.gguf(), nullptr);

  const ModelFile gguf = open_model(test::model_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(gguf.format(), ModelFormat::Gguf);
  expect_stories260k_shape(gguf.config());
  EXPECT_EQ(gguf.config().seq_len, 2048);
  EXPECT_FALSE(gguf.config().tied_embedding);  // the converter wrote output.weight
  ASSERT_NE(gguf.gguf(), nullptr);
}

TEST(BabyLlama, ConfigFromHeader) {
  const ModelFile model = open_model(test::model_path("babyllama-tok105/model5000.bin"));
  const LlamaConfig& c = model.config();
  EXPECT_EQ(c.dim, 128);
  EXPECT_EQ(c.hidden_dim, 352);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 105);
  EXPECT_EQ(c.seq_len, 256);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.tied_embedding);
  EXPECT_EQ(model.tensors().size(), 2u + 5u * 9u);
  EXPECT_EQ(&model.classifier(), &model.tensor("token_embd.weight"));
}

TEST(Stories260K, GgufTensorsEqualTheLlama2cWeightsBitForBit) {
  const ModelFile bin = open_model(test::model_path("stories260K/stories260K.bin"));
  const ModelFile gguf = open_model(test::model_path("stories260K/stories260K.gguf"));
  EXPECT_EQ(bin.tensors().size(), 47u);
  EXPECT_EQ(gguf.tensors().size(), 48u);
  for (const TensorView& g : gguf.tensors()) {
    SCOPED_TRACE(g.name);
    // The checkpoint is tied: its classifier is the token embedding.
    const TensorView& b = g.name == "output.weight" ? bin.classifier() : bin.tensor(g.name);
    EXPECT_EQ(g.type, GgmlType::F32);
    EXPECT_EQ(g.rows, b.rows);
    EXPECT_EQ(g.columns, b.columns);
    ASSERT_EQ(g.byte_size, b.byte_size);
    EXPECT_EQ(std::memcmp(g.data, b.data, g.byte_size), 0);
  }
}

TEST(Stories260K, Llama2cOffsetsFollowTheDocumentedLayout) {
  const std::string path = test::model_path("stories260K/stories260K.bin");
  const test::Bytes raw = test::read_file_bytes(path);
  const ModelFile model = open_model(path);
  // 28-byte header, token_embedding [512][64], rms_att [5][64], then wq [5][64][64].
  const std::size_t wq_layer1 = 28 + 512 * 64 * 4 + 5 * 64 * 4 + 64 * 64 * 4;
  const TensorView& q1 = model.layer_tensor(1, "attn_q");
  EXPECT_EQ(std::memcmp(q1.data, raw.data() + wq_layer1, q1.byte_size), 0);
  // The file ends with rms_final [64] and the RoPE tables 2 x [512][4]; before rms_final
  // come w2 [5][64][172] (ffn_down) and w3 [5][172][64].
  const std::size_t rms_final = raw.size() - 2 * 512 * 4 * 4 - 64 * 4;
  const TensorView& norm = model.tensor("output_norm.weight");
  EXPECT_EQ(norm.data, model.tensor("token_embd.weight").data + (rms_final - 28));
  const TensorView& down4 = model.layer_tensor(4, "ffn_down");
  EXPECT_EQ(down4.rows, 64);
  EXPECT_EQ(down4.columns, 172);
  std::vector<float> row(172);
  down4.row_to_f32(63, row);
  float expected[172];
  std::memcpy(expected, raw.data() + rms_final - 5 * 172 * 64 * 4 - 172 * 4, sizeof(expected));
  EXPECT_EQ(std::memcmp(row.data(), expected, sizeof(expected)), 0);
}

TEST(OpenModel, DetectsTheFormatByContentNotName) {
  test::ScratchDir dir;
  const std::string gguf_copy = dir.file("weights.model");
  const std::string bin_copy = dir.file("weights.ckpt");
  std::filesystem::copy_file(test::model_path("stories260K/stories260K.gguf"), gguf_copy);
  std::filesystem::copy_file(test::model_path("stories260K/stories260K.bin"), bin_copy);
  EXPECT_EQ(open_model(gguf_copy).format(), ModelFormat::Gguf);
  EXPECT_EQ(open_model(bin_copy).format(), ModelFormat::Llama2c);

  const std::string junk = dir.file("junk.dat");
  test::write_file_bytes(junk, test::Bytes(1000, 0x7f));
  expect_error([&] { open_model(junk); }, {"junk.dat", "not a GGUF file", "llama2.c"});
  const std::string junk_gguf = dir.file("junk.gguf");
  test::write_file_bytes(junk_gguf, test::Bytes(1000, 0x7f));
  expect_error([&] { open_model(junk_gguf); }, {"junk.gguf", "not a GGUF file: magic is"});
  expect_error([&] { open_model(dir.file("absent.gguf")); }, {"absent.gguf", "cannot open"});
  expect_error([&] { open_model(dir.path().string()); }, {"not a regular file"});
}

TEST(TinyLlama, QuantizedWeightsRoundTrip) {
  for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                        GgmlType::Q4_0, GgmlType::Q4_1}) {
    SCOPED_TRACE(std::string(ggml_type_name(type)));
    test::ScratchDir dir;
    const std::string path = dir.file("tiny.gguf");
    test::TinyLlama spec;
    spec.matrix_type = type;
    const auto weights = test::write_tiny_llama(path, spec);
    const ModelFile model = open_model(path);
    const LlamaConfig& c = model.config();
    EXPECT_EQ(c.dim, 32);
    EXPECT_EQ(c.kv_dim(), 16);
    EXPECT_EQ(c.rms_eps, 1e-6f);
    EXPECT_EQ(c.rope_theta, 500000.0f);
    EXPECT_EQ(c.rope_dim, 8);  // defaults to head_dim
    EXPECT_FALSE(c.tied_embedding);
    const TensorView& up = model.layer_tensor(1, "ffn_up");
    EXPECT_EQ(up.type, type);
    EXPECT_EQ(up.rows, 64);
    EXPECT_EQ(up.columns, 32);
    const std::vector<float>& source = weights.at(up.name);
    std::vector<float> row(32), reference(32);
    for (std::int64_t r = 0; r < up.rows; ++r) {
      up.row_to_f32(r, row);
      std::vector<std::byte> encoded(ggml_row_bytes(type, 32));
      quantize_row(type, std::span<const float>(source).subspan(r * 32, 32), encoded);
      dequantize_row(type, encoded, reference);
      ASSERT_EQ(row, reference) << "row " << r;
      for (int i = 0; i < 32; ++i) ASSERT_NEAR(row[i], source[r * 32 + i], 0.15f);
    }
    expect_error([&] { up.row_to_f32(64, row); }, {"ffn_up", "row 64"});
  }
}

TEST(TinyLlama, ShapeMismatchNamesTensorAndShapes) {
  test::ScratchDir dir;
  const std::string path = dir.file("bad_shape.gguf");
  test::TinyLlama spec;
  spec.edit_tensor = [](const std::string& name, std::int64_t& rows, std::int64_t&) {
    if (name == "blk.1.attn_k.weight") rows = 32;
    return true;
  };
  test::write_tiny_llama(path, spec);
  expect_error([&] { open_model(path); },
               {"bad_shape.gguf", "'blk.1.attn_k.weight'", "[32][32]", "expected [16][32]"});
}

TEST(TinyLlama, MissingTensor) {
  test::ScratchDir dir;
  const std::string path = dir.file("missing.gguf");
  test::TinyLlama spec;
  spec.edit_tensor = [](const std::string& name, std::int64_t&, std::int64_t&) {
    return name != "blk.0.ffn_up.weight";
  };
  test::write_tiny_llama(path, spec);
  expect_error([&] { open_model(path); }, {"missing.gguf", "'blk.0.ffn_up.weight'", "missing"});
}

TEST(TinyLlama, VocabularyAndEmbeddingMustAgree) {
  test::ScratchDir dir;
  const std::string path = dir.file("vocab.gguf");
  test::TinyLlama spec;
  spec.token_count = 41;
  test::write_tiny_llama(path, spec);
  expect_error([&] { open_model(path); },
               {"vocab.gguf", "token_embd.weight", "40 rows", "41 tokens"});
}

TEST(TinyLlama, UnsupportedWeightTypeNamesTensorAndType) {
  test::ScratchDir dir;
  const std::string path = dir.file("iq4xs.gguf");
  test::TinyLlama spec;
  spec.edit_tensor = [](const std::string& name, std::int64_t&, std::int64_t&) {
    return name != "blk.0.attn_v.weight";
  };
  spec.edit_metadata = [](GgufWriter& writer) {
    const std::vector<std::byte> blocks(16 * 136);  // 16 rows x 256 columns of IQ4_XS
    writer.add_tensor("blk.0.attn_v.weight", GgmlType::IQ4_XS, {256, 16}, blocks);
  };
  test::write_tiny_llama(path, spec);
  expect_error([&] { open_model(path); }, {"iq4xs.gguf", "'blk.0.attn_v.weight'", "IQ4_XS"});
}

TEST(TinyLlama, OtherArchitecturesAreRejected) {
  test::ScratchDir dir;
  const std::string path = dir.file("gpt2.gguf");
  test::TinyLlama spec;
  spec.architecture = "gpt2";
  test::write_tiny_llama(path, spec);
  expect_error([&] { open_model(path); }, {"gpt2.gguf", "general.architecture", "\"gpt2\""});
}

TEST(TinyLlama, UnsupportedRopeSettingsNameTheKeyOrTensor) {
  test::ScratchDir dir;
  {
    const std::string path = dir.file("yarn.gguf");
    test::TinyLlama spec;
    spec.architecture = "qwen2";
    spec.edit_metadata = [](GgufWriter& w) {
      w.add("qwen2.rope.scaling.type", GgufValue::string("yarn"));
    };
    test::write_tiny_llama(path, spec);
    expect_error([&] { open_model(path); }, {"yarn.gguf", "'qwen2.rope.scaling.type'", "yarn"});
  }
  {
    const std::string path = dir.file("factor.gguf");
    test::TinyLlama spec;
    spec.edit_metadata = [](GgufWriter& w) {
      w.add("llama.rope.scaling.type", GgufValue::string("linear"));
      w.add("llama.rope.scaling.factor", GgufValue::f32(-2.0f));
    };
    test::write_tiny_llama(path, spec);
    expect_error([&] { open_model(path); }, {"factor.gguf", "'llama.rope.scaling.factor'", "-2"});
  }
  {
    const std::string path = dir.file("freqs.gguf");
    test::TinyLlama spec;  // head_dim 8: four pairs, not three
    spec.rope_freqs = {1.0f, 2.0f, 4.0f};
    test::write_tiny_llama(path, spec);
    expect_error([&] { open_model(path); }, {"freqs.gguf", "'rope_freqs.weight'", "[1][4]"});
  }
  {
    const std::string path = dir.file("freq_zero.gguf");
    test::TinyLlama spec;
    spec.rope_freqs = {1.0f, 0.0f, 4.0f, 8.0f};
    test::write_tiny_llama(path, spec);
    expect_error([&] { open_model(path); }, {"freq_zero.gguf", "'rope_freqs.weight' [1]"});
  }
  {
    const std::string path = dir.file("bias_shape.gguf");
    test::TinyLlama spec;
    spec.architecture = "qwen2";
    spec.qkv_bias = true;
    spec.edit_tensor = [](const std::string& name, std::int64_t&, std::int64_t& columns) {
      if (name == "blk.1.attn_k.bias") columns = 7;
      return true;
    };
    test::write_tiny_llama(path, spec);
    expect_error([&] { open_model(path); }, {"bias_shape.gguf", "'blk.1.attn_k.bias'", "[1][7]"});
  }
}

TEST(TinyLlama, ConfigErrorsNameTheKey) {
  struct Case {
    const char* key;
    GgufValue value;
    std::vector<std::string_view> parts;
  };
  const Case cases[] = {
      {"llama.attention.head_count",
       GgufValue::u32(5),
       {"llama.attention.head_count (5) does not divide llama.embedding_length (32)"}},
      {"llama.attention.head_count_kv",
       GgufValue::u32(3),
       {"llama.attention.head_count_kv (3) does not divide llama.attention.head_count (4)"}},
      {"llama.context_length", GgufValue::i32(-1), {"'llama.context_length'", "-1 (int32)"}},
      {"llama.embedding_length", GgufValue::string("32"), {"'llama.embedding_length'", "string"}},
      {"llama.block_count", GgufValue::u32(0), {"llama.block_count is 0"}},
      {"llama.feed_forward_length",
       GgufValue::u64(std::uint64_t{1} << 40),
       {"'llama.feed_forward_length'", "1099511627776"}},
      {"llama.rope.dimension_count", GgufValue::u32(7), {"llama.rope.dimension_count is 7"}},
      {"llama.attention.layer_norm_rms_epsilon",
       GgufValue::f32(-1.0f),
       {"llama.attention.layer_norm_rms_epsilon is -1"}},
      {"llama.rope.freq_base", GgufValue::string("x"), {"'llama.rope.freq_base'", "string"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.key);
    test::ScratchDir dir;
    const std::string path = dir.file("config.gguf");
    const std::string key = c.key;
    {
      // A valid llama header with one key replaced by the case's value.
      GgufWriter writer;
      writer.add("general.architecture", GgufValue::string("llama"));
      const std::pair<const char*, GgufValue> standard[] = {
          {"llama.context_length", GgufValue::u32(16)},
          {"llama.embedding_length", GgufValue::u32(32)},
          {"llama.block_count", GgufValue::u32(2)},
          {"llama.feed_forward_length", GgufValue::u32(64)},
          {"llama.attention.head_count", GgufValue::u32(4)},
          {"llama.attention.head_count_kv", GgufValue::u32(2)},
          {"llama.attention.layer_norm_rms_epsilon", GgufValue::f32(1e-5f)},
          {"llama.rope.dimension_count", GgufValue::u32(8)},
          {"llama.rope.freq_base", GgufValue::f32(10000.0f)},
      };
      for (const auto& [name, standard_value] : standard)
        writer.add(name, name == key ? c.value : standard_value);
      writer.add("tokenizer.ggml.tokens",
                 GgufValue::string_array(std::vector<std::string>(40, "x")));
      const std::vector<float> embedding(40 * 32);
      writer.add_tensor_from_f32("token_embd.weight", GgmlType::F32, {32, 40}, embedding);
      writer.write(path);
    }
    const GgufReader reader(path);
    const std::string message =
        expect_error([&] { llama_config_from_gguf(reader); }, {"config.gguf"});
    for (std::string_view part : c.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\": " << message;
  }
}

TEST(TinyLlama, MissingKeyIsNamed) {
  test::ScratchDir dir;
  const std::string path = dir.file("no_layers.gguf");
  GgufWriter writer;
  writer.add("general.architecture", GgufValue::string("llama"));
  writer.add("llama.embedding_length", GgufValue::u32(32));
  writer.write(path);
  expect_error([&] { open_model(path); },
               {"no_layers.gguf", "'llama.feed_forward_length'", "missing"});
}

}  // namespace
}  // namespace qforge
