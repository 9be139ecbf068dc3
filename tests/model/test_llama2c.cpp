// llama2.c checkpoints: a synthetic untied one, and damaged copies of stories260K.bin.
#include <gtest/gtest.h>

#include <cstring>

#include "model/format/llama2c_reader.h"
#include "model/format/model_file.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

using test::ByteBuilder;
using test::Bytes;
using test::expect_error;

// Header + every float numbered by its position, so any misplaced pointer shows.
Bytes synthetic_checkpoint(int dim, int hidden, int layers, int heads, int kv_heads, int vocab,
                           int seq_len, std::size_t float_count) {
  ByteBuilder b;
  b.i32(dim).i32(hidden).i32(layers).i32(heads).i32(kv_heads).i32(vocab).i32(seq_len);
  for (std::size_t i = 0; i < float_count; ++i) b.f32(static_cast<float>(i));
  return b.bytes();
}

float first_value(const TensorView& view) {
  float value;
  std::memcpy(&value, view.data, sizeof(value));
  return value;
}

TEST(Llama2c, UntiedCheckpointHasOutputWeight) {
  // dim 8, hidden 16, 2 layers, 2 heads, 1 kv head (kv_dim 4), vocab 10 (negative: untied),
  // seq_len 3, head_dim 4.
  const std::size_t embedding = 10 * 8, per_layer = 8 + 64 + 32 + 32 + 64 + 8 + 3 * 128;
  const std::size_t total = embedding + 2 * per_layer + 8 + 2 * 3 * 2 + 10 * 8;
  test::ScratchDir dir;
  const std::string path = dir.file("untied.bin");
  test::write_file_bytes(path, synthetic_checkpoint(8, 16, 2, 2, 1, -10, 3, total));

  const ModelFile model = ModelFile::from_llama2c(path);
  const LlamaConfig& c = model.config();
  EXPECT_FALSE(c.tied_embedding);
  EXPECT_EQ(c.vocab_size, 10);
  EXPECT_EQ(c.kv_dim(), 4);
  EXPECT_EQ(c.kv_group(), 2);
  const TensorView& output = model.tensor("output.weight");
  EXPECT_EQ(&model.classifier(), &output);
  EXPECT_EQ(output.rows, 10);
  EXPECT_EQ(first_value(output), static_cast<float>(total - 80));
  // Layer 1's wk starts after layer 0's, which follow all of wq.
  const std::size_t wk1 = embedding + 2 * 8 + 2 * 64 + 32;
  EXPECT_EQ(first_value(model.layer_tensor(1, "attn_k")), static_cast<float>(wk1));
  EXPECT_EQ(model.layer_tensor(1, "attn_k").rows, 4);
  // w1 -> ffn_gate, w3 -> ffn_up, w2 -> ffn_down, in file order w1, w2, w3.
  const std::size_t w1 = embedding + 2 * (8 + 64 + 32 + 32 + 64 + 8);
  EXPECT_EQ(first_value(model.layer_tensor(0, "ffn_gate")), static_cast<float>(w1));
  EXPECT_EQ(first_value(model.layer_tensor(0, "ffn_down")), static_cast<float>(w1 + 2 * 128));
  EXPECT_EQ(first_value(model.layer_tensor(0, "ffn_up")), static_cast<float>(w1 + 4 * 128));
  EXPECT_EQ(model.layer_tensor(0, "ffn_down").columns, 16);
}

class DamagedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    original_ = test::read_file_bytes(test::model_path("stories260K/stories260K.bin"));
    ASSERT_EQ(original_.size(), 1056540u);
  }
  std::string write(const std::string& name, const Bytes& bytes) {
    const std::string path = dir_.file(name);
    test::write_file_bytes(path, bytes);
    return path;
  }
  Bytes original_;
  test::ScratchDir dir_;
};

TEST_F(DamagedCheckpoint, TruncationNamesTheShortTensor) {
  struct Cut {
    std::size_t size;
    std::vector<std::string_view> parts;
  };
  const Cut cuts[] = {
      {0, {"llama2.c header", "truncated", "dim"}},
      {27, {"llama2.c header", "truncated", "seq_len"}},
      {28, {"truncated", "'token_embedding_table'", "[512][64]"}},
      {200000, {"truncated", "'wq'", "[5][64][64]", "[132380, 214300)"}},
      {1056540 - 16384 - 1, {"truncated", "'rms_final_weight'"}},
      {1056540 - 1, {"truncated", "'freq_cis_imag'", "[512][4]"}},
  };
  for (const Cut& cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut.size));
    const std::string path =
        write("cut.bin", Bytes(original_.begin(), original_.begin() + cut.size));
    const std::string message = expect_error([&] { ModelFile::from_llama2c(path); }, {"cut.bin"});
    for (std::string_view part : cut.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\": " << message;
  }
  for (std::size_t size = 28; size < original_.size(); size += 9973) {
    const std::string path = write("sweep.bin", Bytes(original_.begin(), original_.begin() + size));
    expect_error([&] { open_model(path); }, {"sweep.bin", "truncated", "tensor '"});
  }
}

TEST_F(DamagedCheckpoint, TrailingBytesAreAnError) {
  Bytes longer = original_;
  longer.insert(longer.end(), 4, 0);
  const std::string path = write("long.bin", longer);
  expect_error([&] { open_model(path); },
               {"long.bin", "4 bytes follow the last tensor 'freq_cis_imag'"});
}

TEST_F(DamagedCheckpoint, HeaderFieldsAreValidated) {
  struct Field {
    std::size_t index;
    std::int32_t value;
    std::vector<std::string_view> parts;
  };
  const Field fields[] = {
      {2, -5, {"header n_layers is -5"}},
      {0, 0, {"header dim is 0"}},
      {3, 7, {"header n_heads (7) does not divide header dim (64)"}},
      {4, 3, {"header n_kv_heads (3) does not divide header n_heads (8)"}},
      {0, 1 << 30, {"header dim is 1073741824", "limit"}},
      {5, INT32_MIN, {"header vocab_size"}},
      {6, -1, {"header seq_len is -1"}},
  };
  for (const Field& field : fields) {
    Bytes patched = original_;
    test::patch(patched, field.index * 4, field.value);
    const std::string path = write("header.bin", patched);
    const std::string message = expect_error([&] { open_model(path); }, {"header.bin"});
    for (std::string_view part : field.parts)
      EXPECT_NE(message.find(part), std::string::npos) << "lacks \"" << part << "\": " << message;
  }
  Bytes untied = original_;  // negative vocab: a wcls of 512 x 64 floats is now missing
  test::patch(untied, 5 * 4, std::int32_t{-512});
  expect_error([&] { open_model(write("untied.bin", untied)); },
               {"untied.bin", "truncated", "'wcls'"});
  Bytes versioned = original_;
  test::patch(versioned, 0, std::uint32_t{0x616b3432});
  expect_error([&] { open_model(write("v1.bin", versioned)); }, {"v1.bin", "ak42"});
}

}  // namespace
}  // namespace qforge
