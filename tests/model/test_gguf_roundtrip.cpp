// GgufWriter -> GgufReader: every metadata type, every tensor type, alignment, atomic write,
// and the typed getters' errors. The byte layout is checked independently of the reader.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "model/format/ggml_quants.h"
#include "model/format/gguf_reader.h"
#include "model/format/gguf_writer.h"
#include "tests/model/model_test_util.h"

namespace qforge {
namespace {

using test::expect_error;

std::vector<std::pair<std::string, GgufValue>> every_metadata_type() {
  return {
      {"t.u8", GgufValue::u8(200)},
      {"t.i8", GgufValue::i8(-100)},
      {"t.u16", GgufValue::u16(60000)},
      {"t.i16", GgufValue::i16(-30000)},
      {"t.u32", GgufValue::u32(4000000000u)},
      {"t.i32", GgufValue::i32(-2000000000)},
      {"t.u64", GgufValue::u64(18000000000000000000ull)},
      {"t.i64", GgufValue::i64(-9000000000000000000ll)},
      {"t.f32", GgufValue::f32(1e-5f)},
      {"t.f64", GgufValue::f64(-2.718281828459045)},
      {"t.bool_true", GgufValue::boolean(true)},
      {"t.bool_false", GgufValue::boolean(false)},
      {"t.string", GgufValue::string("h\xc3\xa9llo \xe2\x96\x81world")},
      {"t.empty_string", GgufValue::string("")},
      {"t.strings", GgufValue::string_array({"<unk>", "", "\xe2\x96\x81the"})},
      {"t.floats", GgufValue::f32_array({0.0f, -1.5f, 3.25f})},
      {"t.ints", GgufValue::i32_array({1, -2, 2147483647})},
      {"t.u8s", GgufValue::array(GgufValueType::UInt8, {GgufValue::u8(1), GgufValue::u8(255)})},
      {"t.f64s", GgufValue::array(GgufValueType::Float64, {GgufValue::f64(0.1)})},
      {"t.bools", GgufValue::array(GgufValueType::Bool,
                                   {GgufValue::boolean(true), GgufValue::boolean(false)})},
      {"t.empty_array", GgufValue::array(GgufValueType::Int64, {})},
      {"t.nested", GgufValue::array(GgufValueType::Array,
                                    {GgufValue::string_array({"a b", "c"}),
                                     GgufValue::string_array({}), GgufValue::string_array({"d"})})},
  };
}

TEST(GgufRoundTrip, EveryMetadataType) {
  test::ScratchDir dir;
  const std::string path = dir.file("metadata.gguf");
  GgufWriter writer;
  const auto entries = every_metadata_type();
  for (const auto& [key, value] : entries) writer.add(key, value);
  writer.write(path);

  const GgufReader reader(path);
  EXPECT_EQ(reader.version(), 3u);
  EXPECT_EQ(reader.alignment(), 32u);
  ASSERT_EQ(reader.metadata().size(), entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    EXPECT_EQ(reader.metadata()[i].key, entries[i].first);
    EXPECT_EQ(reader.metadata()[i].value, entries[i].second) << entries[i].first;
    EXPECT_EQ(reader.metadata()[i].value.type(), entries[i].second.type());
  }
  EXPECT_EQ(reader.get_u32("t.u32"), 4000000000u);
  EXPECT_EQ(reader.get_u32("t.u8"), 200u);
  EXPECT_EQ(reader.get_i32("t.i16"), -30000);
  EXPECT_EQ(reader.get_i64("t.i64"), -9000000000000000000ll);
  EXPECT_EQ(reader.get_u64("t.u64"), 18000000000000000000ull);
  EXPECT_EQ(reader.get_f32("t.f32"), 1e-5f);
  EXPECT_EQ(reader.get_f64("t.f64"), -2.718281828459045);
  EXPECT_EQ(reader.get_f32("t.u16"), 60000.0f);  // integers are numbers too
  EXPECT_TRUE(reader.get_bool("t.bool_true"));
  EXPECT_FALSE(reader.get_bool("t.bool_false"));
  EXPECT_EQ(reader.get_string("t.string"), "h\xc3\xa9llo \xe2\x96\x81world");
  EXPECT_EQ(reader.get_string_array("t.strings"),
            (std::vector<std::string>{"<unk>", "", "\xe2\x96\x81the"}));
  EXPECT_EQ(reader.get_f32_array("t.floats"), (std::vector<float>{0.0f, -1.5f, 3.25f}));
  EXPECT_EQ(reader.get_i32_array("t.ints"), (std::vector<std::int32_t>{1, -2, 2147483647}));
  EXPECT_EQ(reader.get_i32_array("t.u8s"), (std::vector<std::int32_t>{1, 255}));
  const GgufValue& nested = reader.get("t.nested");
  ASSERT_EQ(nested.elements().size(), 3u);
  EXPECT_EQ(nested.elements()[0].elements()[0].text(), "a b");
  EXPECT_EQ(nested.elements()[2].elements()[0].text(), "d");
  EXPECT_FALSE(reader.find_u32("absent").has_value());
  EXPECT_EQ(reader.find_u32("t.u16"), 60000u);
  EXPECT_TRUE(reader.tensors().empty());
}

TEST(GgufRoundTrip, TypedGettersNameKeyAndType) {
  test::ScratchDir dir;
  const std::string path = dir.file("getters.gguf");
  GgufWriter writer;
  for (const auto& [key, value] : every_metadata_type()) writer.add(key, value);
  writer.write(path);
  const GgufReader reader(path);
  const std::string file = test::file_name_of(path);
  expect_error([&] { reader.get_u32("t.i8"); }, {file, "'t.i8'", "-100", "int8", "uint32"});
  expect_error([&] { reader.get_u32("t.u64"); }, {file, "'t.u64'", "uint64", "uint32"});
  expect_error([&] { reader.get_i32("t.u32"); }, {file, "'t.u32'", "4000000000", "int32"});
  expect_error([&] { reader.get_u64("t.string"); }, {file, "'t.string'", "string"});
  expect_error([&] { reader.get_string("t.f32"); }, {file, "'t.f32'", "float32", "a string"});
  expect_error([&] { reader.get_bool("t.u8"); }, {file, "'t.u8'", "uint8", "bool"});
  expect_error([&] { reader.get_f32("t.f64s"); }, {file, "'t.f64s'", "array"});
  expect_error([&] { reader.get_string_array("t.floats"); }, {file, "'t.floats'", "float32"});
  expect_error([&] { reader.get_u32("no.such.key"); }, {file, "'no.such.key'", "missing"});
  expect_error([&] { reader.tensor("missing.weight"); }, {file, "'missing.weight'", "missing"});
  expect_error([&] { reader.find_u32("t.string"); }, {file, "'t.string'"});
}

// Float values that survive the given type exactly or after its own rounding.
std::vector<float> sample_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

TEST(GgufRoundTrip, EveryTensorTypeWithAlignment) {
  for (const std::uint32_t alignment : {32u, 64u, 8u}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    test::ScratchDir dir;
    const std::string path = dir.file("tensors.gguf");
    const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                              GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1};
    GgufWriter writer(alignment);
    writer.add("general.architecture", GgufValue::string("test"));
    std::vector<std::vector<float>> inputs;
    for (std::size_t t = 0; t < std::size(types); ++t) {
      inputs.push_back(sample_values(96 * 3, static_cast<std::uint32_t>(t)));
      writer.add_tensor_from_f32("tensor." + std::string(ggml_type_name(types[t])), types[t],
                                 {96, 3}, inputs.back());
    }
    const std::vector<float> vector_values = {1.0f, 2.0f, 3.0f};
    writer.add_tensor_from_f32("vector", GgmlType::F32, {3}, vector_values);
    writer.write(path);
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

    const GgufReader reader(path);
    EXPECT_EQ(reader.alignment(), alignment);
    EXPECT_EQ(reader.data_offset() % alignment, 0u);
    EXPECT_EQ(reader.file_size() % alignment, 0u);  // the last tensor is padded too
    if (alignment != 32) {
      EXPECT_EQ(reader.get_u32("general.alignment"), alignment);
    }
    ASSERT_EQ(reader.tensors().size(), std::size(types) + 1);
    for (std::size_t t = 0; t < std::size(types); ++t) {
      const GgufTensorInfo& info = reader.tensors()[t];
      SCOPED_TRACE(info.name);
      EXPECT_EQ(info.type, types[t]);
      EXPECT_EQ(info.n_dims, 2u);
      EXPECT_EQ(info.columns(), 96u);
      EXPECT_EQ(info.rows(), 3u);
      EXPECT_EQ(info.offset % alignment, 0u);
      EXPECT_EQ(info.byte_size, ggml_row_bytes(types[t], 96) * 3);
      const std::span<const std::byte> data = reader.tensor_data(info);
      // The stored bytes are exactly the reference encoding of each row.
      for (std::size_t row = 0; row < 3; ++row) {
        std::vector<std::byte> expected(ggml_row_bytes(types[t], 96));
        quantize_row(types[t], std::span<const float>(inputs[t]).subspan(row * 96, 96), expected);
        ASSERT_EQ(
            std::memcmp(data.data() + row * expected.size(), expected.data(), expected.size()), 0);
        std::vector<float> decoded(96);
        dequantize_row(types[t], data.subspan(row * expected.size(), expected.size()), decoded);
        for (std::size_t i = 0; i < 96; ++i) {
          const float tolerance = types[t] == GgmlType::F32 ? 0.0f : 0.35f;
          ASSERT_NEAR(decoded[i], inputs[t][row * 96 + i], tolerance);
        }
      }
    }
    const GgufTensorInfo& vector = reader.tensor("vector");
    EXPECT_EQ(vector.n_dims, 1u);
    EXPECT_EQ(vector.rows(), 1u);
    float stored[3];
    std::memcpy(stored, reader.tensor_data(vector).data(), sizeof(stored));
    EXPECT_EQ(stored[2], 3.0f);
  }
}

TEST(GgufRoundTrip, ByteLayoutIsSpecExact) {
  test::ScratchDir dir;
  const std::string path = dir.file("layout.gguf");
  GgufWriter writer;
  writer.add("k", GgufValue::u16(0x1234));
  const std::vector<float> values = {1.0f, 2.0f};
  writer.add_tensor_from_f32("w", GgmlType::F32, {2}, values);
  writer.write(path);

  test::ByteBuilder expected;
  expected.raw("GGUF").u32(3).u64(1).u64(1);
  expected.str("k").u32(2).put<std::uint16_t>(0x1234);
  expected.str("w").u32(1).u64(2).u32(0).u64(0);
  expected.pad_to(32);
  expected.f32(1.0f).f32(2.0f).pad_to(32);
  EXPECT_EQ(test::read_file_bytes(path), expected.bytes());
}

TEST(GgufRoundTrip, UnsupportedTypesAreListedButNotUsable) {
  test::ScratchDir dir;
  const std::string path = dir.file("iq4xs.gguf");
  GgufWriter writer;
  const std::vector<std::byte> iq4xs(136 * 2);
  writer.add_tensor("blk.0.ffn_down.weight", GgmlType::IQ4_XS, {256, 2}, iq4xs);
  writer.write(path);
  const GgufReader reader(path);
  const GgufTensorInfo& info = reader.tensor("blk.0.ffn_down.weight");
  EXPECT_EQ(info.type, GgmlType::IQ4_XS);
  EXPECT_EQ(info.byte_size, 272u);
  expect_error([&] { reader.tensor_data(info); },
               {test::file_name_of(path), "'blk.0.ffn_down.weight'", "IQ4_XS"});
}

TEST(GgufWriter, RejectsBadInputAndLeavesNoPartialFile) {
  GgufWriter writer;
  writer.add("a", GgufValue::u8(1));
  expect_error([&] { writer.add("a", GgufValue::u8(2)); }, {"'a'", "twice"});
  expect_error([&] { writer.add("general.alignment", GgufValue::u32(64)); }, {"general.alignment"});
  const std::vector<float> values(33);
  expect_error([&] { writer.add_tensor_from_f32("q", GgmlType::Q8_0, {33}, values); },
               {"'q'", "Q8_0", "33"});
  expect_error([&] { writer.add_tensor_from_f32("f", GgmlType::F32, {32}, values); },
               {"'f'", "33"});
  expect_error(
      [&] {
        writer.add_tensor_from_f32("d", GgmlType::F32, {1, 1, 1, 1, 33}, values);
      },
      {"'d'", "dims"});
  expect_error([] { GgufWriter bad(24); }, {"24", "power of two"});
  expect_error([] { GgufValue::array(GgufValueType::UInt8, {GgufValue::i8(1)}); },
               {"element 0", "int8"});

  test::ScratchDir dir;
  const std::string path = (dir.path() / "no-such-dir" / "out.gguf").string();
  expect_error([&] { writer.write(path); }, {"out.gguf"});
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(GgufWriter, ReplacesAnExistingFileWhole) {
  test::ScratchDir dir;
  const std::string path = dir.file("replace.gguf");
  test::write_file_bytes(path, test::Bytes(5000, 0xAB));
  GgufWriter writer;
  writer.add("x", GgufValue::string("y"));
  writer.write(path);
  const GgufReader reader(path);
  EXPECT_EQ(reader.get_string("x"), "y");
  EXPECT_LT(reader.file_size(), 5000u);
}

}  // namespace
}  // namespace qforge
