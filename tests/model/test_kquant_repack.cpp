// K-quant tensors repacked into two-level groups (model/format/ggml_kquant_repack.h), and
// Q5_0 / Q5_1 into int5 groups, without requantization: for random blocks (every bit pattern of the
// quants, scale and minimum fields; zero, the largest, sub-normal and negative f16 d / dmin), the
// packed weights dequantize to ggml's decode (ggml_kquants.cpp, tested against ggml's formula in
// test_kquants.cpp) bit for bit, through the whole-tensor form, the streamed packing and
// its unpacking; the packed bytes stay near the file's; a non-finite d is an error naming
// the tensor, row and super-block.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/ggml_kquant_repack.h"
#include "model/format/ggml_quants.h"
#include "model/format/ggml_repack.h"
#include "ops/quant/pack.h"

namespace qforge {
namespace {

// Offsets of the f16 d (and dmin) fields of a block.
struct Fields {
  std::size_t d, dmin;  // dmin == d: none
};
Fields fields_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return {80, 82};
    case GgmlType::Q3_K:
      return {108, 108};
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q5_1:
      return {0, 2};
    case GgmlType::Q5_0:
      return {0, 0};
    default:  // Q6_K
      return {208, 208};
  }
}

// A random matrix of `type`: random bytes, then d (and dmin) chosen per block among zero,
// 65504, sub-normals and random finite values of either sign.
std::vector<std::byte> random_blocks(GgmlType type, std::int64_t rows, std::int64_t columns,
                                     unsigned seed) {
  std::mt19937 gen(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); };
  const std::uint64_t bytes = ggml_row_bytes(type, std::uint64_t(columns)) * std::uint64_t(rows);
  std::vector<std::byte> data(bytes);
  for (std::byte& b : data) b = static_cast<std::byte>(uniform(0, 255));
  const std::uint64_t block = ggml_type_traits(type).block_bytes;
  const Fields f = fields_of(type);
  int round = 0;
  for (std::uint64_t at = 0; at < bytes; at += block)
    for (const std::size_t field : {f.d, f.dmin}) {
      std::uint16_t h;
      switch (round++ % 8) {
        case 0:
          h = 0;
          break;
        case 1:
          h = 0x7bff;
          break;
        case 2:
          h = static_cast<std::uint16_t>(uniform(1, 0x3ff));
          break;
        default:
          h = static_cast<std::uint16_t>(uniform(0, 0x7bff) | uniform(0, 1) << 15);
      }
      std::memcpy(data.data() + at + field, &h, 2);
    }
  return data;
}

TensorView view_of(GgmlType type, std::int64_t rows, std::int64_t columns,
                   const std::vector<std::byte>& data, const char* name) {
  TensorView t;
  t.name = name;
  t.type = type;
  t.file_type = type;
  t.rows = rows;
  t.columns = columns;
  t.data = data.data();
  t.byte_size = data.size();
  return t;
}

// ggml's decode of the view, row by row.
std::vector<float> ggml_decode(const TensorView& t) {
  std::vector<float> out(static_cast<std::size_t>(t.rows * t.columns));
  for (std::int64_t r = 0; r < t.rows; ++r)
    dequantize_row(t.type, t.row(r),
                   std::span<float>(out.data() + r * t.columns, std::size_t(t.columns)));
  return out;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << " value " << i << ": " << got[i] << " vs " << want[i];
}

class KQuantRepack : public testing::TestWithParam<GgmlType> {};

TEST_P(KQuantRepack, PacksExactlyWhatGgmlDecodes) {
  const GgmlType type = GetParam();
  const std::string name(ggml_type_name(type));
  const std::int64_t columns = 768;         // three super-blocks
  const std::int64_t rows[] = {21, 16, 7};  // a fused q | k | v of row counts off the panels
  std::vector<std::vector<std::byte>> data;
  std::vector<TensorView> views;
  for (int part = 0; part < 3; ++part)
    data.push_back(random_blocks(type, rows[part], columns, 11u * part + unsigned(type)));
  for (int part = 0; part < 3; ++part)
    views.push_back(view_of(type, rows[part], columns, data[std::size_t(part)], "blk.0.attn"));
  const TensorView* parts[] = {&views[0], &views[1], &views[2]};
  std::vector<float> want;
  for (const TensorView& v : views) {
    const std::vector<float> rows_of = ggml_decode(v);
    want.insert(want.end(), rows_of.begin(), rows_of.end());
  }

  const std::optional<QuantScheme> scheme = native_scheme(type);
  ASSERT_TRUE(scheme.has_value()) << name;
  const bool super_blocks = ggml_type_traits(type).block_values == 256;
  EXPECT_EQ(scheme->superblock, super_blocks ? 256 : 0);
  const QuantizedTensor whole = native_quantized(parts);
  ASSERT_EQ(whole.n, 44);
  expect_bits(dequantize(whole), want, name + " whole tensor");

  const PackedWeights packed =
      pack_operands_by_rows(whole.n, columns, *scheme, native_operand_rows(parts), 2);
  EXPECT_EQ(packed.header.superblock_groups, super_blocks ? 256 / scheme->group : 0);
  const QuantizedTensor back = unpack_weights(packed);
  expect_bits(dequantize(back), want, name + " packed and unpacked");
  EXPECT_EQ(back.q, whole.q);

  // Bytes per weight against the file's (Q4_K 0.578 / 0.5625, Q5_K 0.703 / 0.6875, Q6_K
  // 1.133 / 0.820; Q5_0 and Q5_1 the file's own 0.6875 and 0.75).
  const double file = double(ggml_row_bytes(type, 256)) / 256;
  const double ours = double(packed.geometry.panel_bytes) / (16.0 * double(columns));
  const double bound = type == GgmlType::Q5_0 || type == GgmlType::Q5_1   ? 1.0
                       : type == GgmlType::Q4_K || type == GgmlType::Q5_K ? 1.03
                       : type == GgmlType::Q6_K                           ? 1.39
                       : type == GgmlType::Q3_K                           ? 1.48
                                                                          : 1.96;
  EXPECT_LE(ours / file, bound) << name << ": " << ours << " vs " << file << " bytes per weight";
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantRepack,
                         testing::Values(GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                         GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_0,
                                         GgmlType::Q5_1),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

TEST(KQuantRepack, ANonFiniteScaleNamesTheTensorRowAndSuperBlock) {
  for (const GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q2_K}) {
    std::vector<std::byte> data = random_blocks(type, 3, 512, 5);
    const std::uint64_t block = ggml_row_bytes(type, 256);
    const std::uint16_t inf = 0x7c00;
    std::memcpy(data.data() + ggml_row_bytes(type, 512) * 2 + block + fields_of(type).dmin, &inf,
                2);
    const TensorView view = view_of(type, 3, 512, data, "blk.3.ffn_up.weight");
    const TensorView* parts[] = {&view};
    try {
      native_quantized(parts);
      ADD_FAILURE() << ggml_type_name(type) << ": no error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("'blk.3.ffn_up.weight' row 2 super-block 1"), std::string::npos)
          << message;
      EXPECT_NE(message.find(type == GgmlType::Q6_K ? "d is inf" : "dmin is inf"),
                std::string::npos)
          << message;
    }
  }
}

TEST(KQuantRepack, Q5TypesAreInt5) {
  EXPECT_EQ(to_string(*native_scheme(GgmlType::Q5_K)), "int5-g32-sb256-asym");
  EXPECT_EQ(to_string(*native_scheme(GgmlType::Q5_0)), "int5-g32");
  EXPECT_EQ(to_string(*native_scheme(GgmlType::Q5_1)), "int5-g32-asym");
}

// A Q5_1 block's minimum that is not finite names the tensor, row and block.
TEST(KQuantRepack, ANonFiniteQ5MinimumNamesTheBlock) {
  std::vector<std::byte> data = random_blocks(GgmlType::Q5_1, 2, 64, 9);
  const std::uint16_t nan = 0x7e00;
  std::memcpy(data.data() + ggml_row_bytes(GgmlType::Q5_1, 64) + 24 + 2, &nan, 2);
  const TensorView view = view_of(GgmlType::Q5_1, 2, 64, data, "blk.0.ffn_gate.weight");
  const TensorView* parts[] = {&view};
  try {
    native_quantized(parts);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'blk.0.ffn_gate.weight' row 1 block 1"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qforge
