// The precisions a model can load in: native repacking of GGUF Q8_0 / Q4_0 / Q4_1 tensors
// (exact),
// the int8 embedding table, bf16 dense layers, and the --quant / --lm-head parser.
#include <gtest/gtest.h>

#include <cstring>

#include <algorithm>

#include <limits>

#include <cmath>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/format/ggml_quants.h"
#include "model/format/ggml_repack.h"
#include "model/runtime/jit_linear.h"
#include "model/runtime/model_session.h"
#include "ops/quant/pack.h"
#include "tests/model/tiny_llama.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("qforge_precision_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

class NativeRepack : public testing::TestWithParam<GgmlType> {};

// Every value of the repacked tensor, times its scale, is what ggml decodes: bit for bit.
TEST_P(NativeRepack, DecodesExactlyAsGgml) {
  const std::string path = temp_path("native.gguf");
  test::TinyLlama spec;
  spec.matrix_type = GetParam();
  test::write_tiny_llama(path, spec);
  const ModelFile file = open_model(path);
  for (const char* role : {"attn_q", "ffn_down", "ffn_gate"}) {
    const TensorView& t = file.layer_tensor(1, role);
    const TensorView* views[] = {&t};
    const QuantizedTensor q = native_quantized(views);
    ASSERT_EQ(q.n, t.rows);
    ASSERT_EQ(q.k, t.columns);
    const bool five = GetParam() == GgmlType::Q5_0 || GetParam() == GgmlType::Q5_1;
    const bool with_min = GetParam() == GgmlType::Q4_1 || GetParam() == GgmlType::Q5_1;
    EXPECT_EQ(q.scheme.bits, GetParam() == GgmlType::Q8_0 ? 8 : five ? 5 : 4);
    std::vector<float> row(static_cast<std::size_t>(t.columns));
    for (std::int64_t r = 0; r < t.rows; ++r) {
      t.row_to_f32(r, row);
      for (std::int64_t i = 0; i < t.columns; ++i) {
        const std::size_t gi = std::size_t(r * (t.columns / 32) + i / 32);
        const float offset = q.offsets.empty() ? 0.f : q.offsets[gi];
        const float value = q.scales[gi] * float(q.q[std::size_t(r * t.columns + i)]) + offset;
        ASSERT_EQ(value, row[std::size_t(i)]) << role << " [" << r << "][" << i << "]";
      }
    }
    // Packed and unpacked again, nothing changes.
    const QuantizedTensor back = unpack_weights(pack_quantized(q, 1));
    EXPECT_EQ(back.q, q.q);
    EXPECT_EQ(back.scales, q.scales);
    EXPECT_EQ(back.offsets, q.offsets);
    EXPECT_EQ(q.offsets.empty(), !with_min);
    // What a load packs, the rows streamed from the blocks: the same bytes.
    const PackedWeights streamed =
        pack_operands_by_rows(t.rows, t.columns, q.scheme, native_operand_rows(views), 2);
    const PackedWeights whole = pack_quantized(q, 1);
    ASSERT_EQ(streamed.geometry.total_bytes, whole.geometry.total_bytes);
    EXPECT_EQ(std::memcmp(streamed.data.data(), whole.data.data(), whole.geometry.total_bytes), 0)
        << role;
  }
  // Stacked q | k | v rows stream across the tensors' boundaries.
  const TensorView* qkv[] = {&file.layer_tensor(0, "attn_q"), &file.layer_tensor(0, "attn_k"),
                             &file.layer_tensor(0, "attn_v")};
  const QuantizedTensor stacked = native_quantized(qkv);
  const PackedWeights streamed =
      pack_operands_by_rows(stacked.n, stacked.k, stacked.scheme, native_operand_rows(qkv), 2);
  const PackedWeights whole = pack_quantized(stacked, 1);
  ASSERT_EQ(streamed.geometry.total_bytes, whole.geometry.total_bytes);
  EXPECT_EQ(std::memcmp(streamed.data.data(), whole.data.data(), whole.geometry.total_bytes), 0);
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, NativeRepack,
                         testing::Values(GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                         GgmlType::Q5_0, GgmlType::Q5_1));

TEST(NativeRepack, RejectsTypesWithoutAnExactLayout) {
  const std::string path = temp_path("f16.gguf");
  test::TinyLlama spec;
  spec.matrix_type = GgmlType::F16;
  test::write_tiny_llama(path, spec);
  const ModelFile file = open_model(path);
  const TensorView* views[] = {&file.layer_tensor(0, "attn_q")};
  EXPECT_FALSE(native_scheme(GgmlType::F16).has_value());
  EXPECT_THROW(native_quantized(views), Error);
  std::filesystem::remove(path);
}

// Q4_1 (w = d * n + m) is kept as it is: int4 g32 asymmetric whose offsets are the blocks'
// minima m, in every layer but the int8 classifier.
TEST(NativeRepack, Q4_1KeepsItsMinima) {
  const std::string path = temp_path("q41_model.gguf");
  test::TinyLlama spec;
  spec.matrix_type = GgmlType::Q4_1;
  test::write_tiny_llama(path, spec);
  auto native = open_session(path, parse_precision("native"), 1);
  for (const auto& [name, layer] : native->model.weights.named_layers()) {
    if (name == "output") continue;  // the classifier is int8 per-channel
    const auto* jit = dynamic_cast<const JitLinear*>(layer);
    ASSERT_NE(jit, nullptr) << name;
    const PackedWeights& packed = jit->quantized().weights();
    EXPECT_EQ(packed.header.bits, 4) << name;
    EXPECT_EQ(packed.header.asymmetric, 1) << name;
    EXPECT_EQ(packed.header.group, 32) << name;
    EXPECT_FALSE(unpack_weights(packed).offsets.empty()) << name << ": minima became zero points";
  }
  std::filesystem::remove(path);
}

// The SwiGLU pair of two quantized tensors, interleaved, unpacks to each half.
TEST(NativeRepack, PairUnpacksToBothHalves) {
  std::mt19937 rng(3);
  const auto random_tensor = [&](std::int64_t n, std::int64_t k) {
    std::vector<float> w(std::size_t(n * k));
    std::normal_distribution<float> normal;
    for (float& x : w) x = normal(rng);
    QuantScheme scheme;
    scheme.granularity = Granularity::per_group;
    scheme.group = 32;
    return quantize_reference(w.data(), n, k, scheme);
  };
  const QuantizedTensor gate = random_tensor(37, 96), up = random_tensor(37, 96);
  const PackedWeights pair = pack_quantized_pair(gate, up, 1);
  EXPECT_EQ(pair.header.interleaved_pair, 1);
  for (int half = 0; half < 2; ++half) {
    const QuantizedTensor back = unpack_weights(pair, half);
    EXPECT_EQ(back.q, (half ? up : gate).q);
    EXPECT_EQ(back.scales, (half ? up : gate).scales);
  }
}

// The largest |difference| of `got` from `reference`, relative to the largest |reference|.
double relative_max_diff(std::span<const float> reference, std::span<const float> got) {
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    max_abs = std::max(max_abs, double(std::fabs(reference[i])));
    max_diff = std::max(max_diff, double(std::fabs(reference[i] - got[i])));
  }
  return max_diff / max_abs;
}

class NativeModel : public testing::TestWithParam<GgmlType> {};

// A native model computes with the file's own weights: its logits follow the f32 run of
// the same file (which decodes the blocks exactly) up to the activations' int8 rounding,
// and at least as closely as requantizing the decoded weights to the same layout does (Q8_0
// and Q4_0 requantize to the file's own integers and scales).
TEST_P(NativeModel, FollowsTheFileItsWeightsCameFrom) {
  const GgmlType type = GetParam();
  const std::string path = temp_path("native_model.gguf");
  test::TinyLlama spec;
  spec.matrix_type = type;
  test::write_tiny_llama(path, spec);
  auto f32 = open_session(path, parse_precision("f32"), 1);
  auto native = open_session(path, parse_precision("native"), 1);
  // Requantized from the file's decode into the same bits (Q5: int4, one bit fewer).
  const char* requantized_as = type == GgmlType::Q8_0                             ? "int8-g32"
                               : type == GgmlType::Q4_0 || type == GgmlType::Q5_0 ? "int4-g32"
                                                                                  : "int4-g32-asym";
  auto requantized = open_session(path, parse_precision(requantized_as), 1);
  EXPECT_TRUE(native->model.weights.precision.native);
  const auto* qkv = dynamic_cast<const JitLinear*>(native->model.weights.layers[0].wqkv.get());
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->quantized().weights().header.group, 32);
  // The embedding keeps the file's rows: each lookup is the file's decode, exactly.
  const EmbeddingTable& table = native->model.weights.embedding;
  EXPECT_EQ(table.row_bytes(), ggml_row_bytes(type, std::uint64_t(table.dim())));
  std::vector<float> got(table.dim()), want(table.dim());
  for (std::int64_t token = 0; token < table.rows(); ++token) {
    table.lookup(token, got.data());
    f32->model.weights.embedding.lookup(token, want.data());
    ASSERT_EQ(got, want) << "token " << token;
  }
  const std::vector<int> tokens = {1, 5, 9, 13};
  const std::span<const float> expected = f32->executor->forward(tokens, 0, true);
  const std::vector<float> reference(expected.begin(), expected.end());
  const double native_diff =
      relative_max_diff(reference, native->executor->forward(tokens, 0, true));
  const double requantized_diff =
      relative_max_diff(reference, requantized->executor->forward(tokens, 0, true));
  // A sanity bound on the int8 activation rounding of this tiny random model (the largest
  // logit error of four positions, relative to the largest logit); the comparison with
  // requantizing below is the real check.
  EXPECT_LT(native_diff, 0.08);
  EXPECT_GT(native_diff, 0.0);  // activations are quantized: not the f32 computation itself
  if (type == GgmlType::Q8_0 || type == GgmlType::Q4_0) {
    // int8-g32 of Q8_0's decode, and int4-g32 of Q4_0's (d = extreme / -8, the convention
    // of both), give back the file's integers and scales.
    const auto* again =
        dynamic_cast<const JitLinear*>(requantized->model.weights.layers[0].wqkv.get());
    ASSERT_NE(again, nullptr);
    const QuantizedTensor a = unpack_weights(qkv->quantized().weights());
    const QuantizedTensor b = unpack_weights(again->quantized().weights());
    EXPECT_EQ(a.q, b.q) << requantized_as;
    EXPECT_EQ(a.scales, b.scales) << requantized_as;
    // Q8_0's whole model then computes alike; int4-g32's default policy gives the output
    // layer other bits than the file's Q4_0, so its logits differ by that alone.
    if (type == GgmlType::Q8_0) {
      EXPECT_LE(native_diff, requantized_diff) << requantized_as;
    }
  } else {
    EXPECT_LT(native_diff, requantized_diff) << requantized_as;
  }
  if (type == GgmlType::Q5_0 || type == GgmlType::Q5_1) {  // weight-only kernels read no int5:
    auto woq = open_session(path, parse_precision("woq-native"), 1);  // those layers stay W8A8
    const auto* layer = dynamic_cast<const JitLinear*>(woq->model.weights.layers[0].wqkv.get());
    ASSERT_NE(layer, nullptr);
    EXPECT_FALSE(layer->quantized().weight_only());
    EXPECT_LT(relative_max_diff(reference, woq->executor->forward(tokens, 0, true)), 0.08);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, NativeModel,
                         testing::Values(GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                                         GgmlType::Q5_0, GgmlType::Q5_1));

// rows x dim values drawn from N(0, 0.5).
std::vector<float> random_table(int rows, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.5f);
  std::vector<float> values(std::size_t(rows * dim));
  for (float& v : values) v = normal(rng);
  return values;
}

TEST(EmbeddingTable, Int8RowsDequantizeWithinHalfAStep) {
  const int rows = 13, dim = 70;
  std::vector<float> values = random_table(rows, dim, 11);
  std::fill(values.begin() + 2 * dim, values.begin() + 3 * dim, 0.f);  // an all-zero row
  const EmbeddingTable f32(values, rows, dim, false), int8(values, rows, dim, true);
  EXPECT_TRUE(int8.int8());
  EXPECT_EQ(int8.bytes(), std::uint64_t(rows) * dim + rows * sizeof(float));
  std::vector<float> a(dim), b(dim);
  for (int r = 0; r < rows; ++r) {
    f32.lookup(r, a.data());
    int8.lookup(r, b.data());
    float max_abs = 0;
    for (int i = 0; i < dim; ++i) max_abs = std::max(max_abs, std::fabs(a[i]));
    for (int i = 0; i < dim; ++i) {
      EXPECT_EQ(a[i], values[std::size_t(r * dim + i)]);
      EXPECT_LE(std::fabs(a[i] - b[i]), max_abs / 127.f * 0.5f * 1.0001f) << r << "," << i;
    }
  }
  EXPECT_THROW(int8.lookup(rows, b.data()), Error);
}

// Reading the rows 16 at a time from two threads gives the table of the whole matrix,
// and a non-finite value is named by its row.
TEST(EmbeddingTable, Int8FromRowsMatchesTheWholeMatrix) {
  const int rows = 101, dim = 37;
  std::vector<float> values = random_table(rows, dim, 12);
  const RowSource source = [&](std::int64_t first, std::int64_t count, float* out) {
    std::copy_n(values.data() + first * dim, count * dim, out);
  };
  const EmbeddingTable whole(values, rows, dim, true);
  const EmbeddingTable by_rows = EmbeddingTable::int8_from_rows(rows, dim, source, 2);
  std::vector<float> a(dim), b(dim);
  for (int r = 0; r < rows; ++r) {
    whole.lookup(r, a.data());
    by_rows.lookup(r, b.data());
    ASSERT_EQ(a, b) << r;
  }
  values[std::size_t(40 * dim + 3)] = std::numeric_limits<float>::quiet_NaN();
  try {
    EmbeddingTable::int8_from_rows(rows, dim, source, 2);
    ADD_FAILURE() << "a NaN was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("row 40"), std::string::npos) << e.what();
  }
}

TEST(Precision, ParsesEveryForm) {
  EXPECT_FALSE(parse_precision("f32").quantized);
  const Precision bf16 = parse_precision("bf16");
  EXPECT_FALSE(bf16.quantized);
  EXPECT_EQ(bf16.dense, DenseType::bf16);
  EXPECT_TRUE(parse_precision("").native);
  EXPECT_TRUE(parse_precision("native").native);
  EXPECT_FALSE(parse_precision("int8").native);
  EXPECT_EQ(parse_precision("int4-g128").scheme.bits, 4);
  const Precision head = parse_precision("int8", "bf16");
  EXPECT_TRUE(head.lm_head_dense);
  EXPECT_EQ(head.dense, DenseType::bf16);
  EXPECT_THROW(parse_precision("int3"), Error);
  EXPECT_THROW(parse_precision("int8", "int4"), Error);
}

// bf16 weights (and activations, where oneDNN runs bf16) stay close to f32.
TEST(Precision, Bf16FollowsF32) {
  const std::string model = test::model_path("stories260K/stories260K.gguf");
  auto f32 = open_session(model, parse_precision("f32"), 1);
  auto bf16 = open_session(model, parse_precision("bf16"), 1);
  const std::vector<int> tokens = {1, 403, 407, 261, 378};
  const std::span<const float> a = f32->executor->forward(tokens, 0, true);
  const std::vector<float> reference(a.begin(), a.end());
  const std::span<const float> b = bf16->executor->forward(tokens, 0, true);
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    max_abs = std::max(max_abs, double(std::fabs(reference[i])));
    max_diff = std::max(max_diff, double(std::fabs(reference[i] - b[i])));
  }
  EXPECT_GT(max_diff, 0.0);
  EXPECT_LT(max_diff, 0.03 * max_abs);
}

}  // namespace
}  // namespace qforge
