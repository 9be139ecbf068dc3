// Malformed GGUF files, built byte by byte or cut from the real stories260K.gguf: each must
// raise a qforge::Error naming the file and the field, and none may crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "model/format/gguf_reader.h"
#include "model/format/model_file.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

using test::ByteBuilder;
using test::Bytes;
using test::expect_error;

constexpr std::uint64_t kHuge = std::uint64_t{1} << 60;

struct RawTensor {
  std::string name = "w";
  std::uint32_t n_dims = 2;
  std::vector<std::uint64_t> dims = {32, 2};
  std::uint32_t type = 0;  // F32
  std::uint64_t offset = 0;
};

// GGUF v3 with one string metadata entry and one tensor, then `data_bytes` of zeros.
Bytes one_tensor_file(const RawTensor& tensor, std::uint64_t data_bytes,
                      std::uint32_t version = 3) {
  ByteBuilder b;
  b.raw("GGUF").u32(version).u64(1).u64(1);
  b.str("general.architecture").u32(8).str("test");
  b.str(tensor.name).u32(tensor.n_dims);
  for (std::uint64_t dim : tensor.dims) b.u64(dim);
  b.u32(tensor.type).u64(tensor.offset);
  b.pad_to(32).zeros(data_bytes);
  return b.bytes();
}

class MalformedGguf : public ::testing::Test {
 protected:
  // Writes `bytes` as `name` and expects opening it to fail with all `parts` (plus the
  // file name) in the message.
  std::string expect_rejected(const std::string& name, const Bytes& bytes,
                              std::initializer_list<std::string_view> parts,
                              std::source_location where = std::source_location::current()) {
    const std::string path = dir_.file(name);
    test::write_file_bytes(path, bytes);
    const std::string message = expect_error([&] { GgufReader reader(path); }, parts, where);
    if (message.find(name) == std::string::npos)
      ADD_FAILURE_AT(where.file_name(), where.line()) << "message lacks the file name: " << message;
    return message;
  }

  test::ScratchDir dir_;
};

TEST_F(MalformedGguf, TheMinimalFileIsValid) {
  const std::string path = dir_.file("minimal.gguf");
  test::write_file_bytes(path, one_tensor_file({}, 256));
  const GgufReader reader(path);
  EXPECT_EQ(reader.tensor("w").byte_size, 256u);
  EXPECT_EQ(reader.get_string("general.architecture"), "test");
  EXPECT_EQ(reader.data_offset() % 32, 0u);
}

TEST_F(MalformedGguf, Version2IsRead) {
  const std::string path = dir_.file("v2.gguf");
  test::write_file_bytes(path, one_tensor_file({}, 256, 2));
  const GgufReader reader(path);
  EXPECT_EQ(reader.version(), 2u);
  EXPECT_EQ(reader.tensor("w").rows(), 2u);
}

TEST_F(MalformedGguf, Header) {
  expect_rejected("empty.gguf", {}, {"header", "truncated", "magic"});
  Bytes bad_magic = one_tensor_file({}, 256);
  bad_magic[3] = 'X';
  expect_rejected("magic.gguf", bad_magic, {"magic", "GGUX", "expected \"GGUF\""});
  expect_rejected("v1.gguf", one_tensor_file({}, 256, 1), {"version is 1", "v1"});
  expect_rejected("v4.gguf", one_tensor_file({}, 256, 4), {"version is 4"});
  expect_rejected("big_endian.gguf", one_tensor_file({}, 256, 0x03000000), {"big-endian"});
  expect_rejected("short_header.gguf", Bytes{'G', 'G', 'U', 'F', 3, 0, 0, 0, 1},
                  {"header", "truncated", "tensor_count"});
}

TEST_F(MalformedGguf, AbsurdCounts) {
  Bytes tensors = one_tensor_file({}, 256);
  test::patch(tensors, 8, kHuge);
  expect_rejected("tensor_count.gguf", tensors, {"tensor_count", "1152921504606846976"});
  Bytes entries = one_tensor_file({}, 256);
  test::patch(entries, 16, kHuge);
  expect_rejected("kv_count.gguf", entries, {"metadata_kv_count", "1152921504606846976"});
  Bytes max_entries = one_tensor_file({}, 256);
  test::patch(max_entries, 16, std::numeric_limits<std::uint64_t>::max());
  expect_rejected("kv_count_max.gguf", max_entries, {"metadata_kv_count"});
}

TEST_F(MalformedGguf, StringsPastTheEnd) {
  Bytes key = one_tensor_file({}, 256);
  test::patch(key, 24, kHuge);  // length of the first key
  expect_rejected("key_length.gguf", key, {"metadata entry 0", "key", "length", "past the end"});
  Bytes value = one_tensor_file({}, 256);
  test::patch(value, 24 + 8 + 20 + 4, std::uint64_t{100000});  // length of the value "test"
  expect_rejected("value_length.gguf", value,
                  {"metadata 'general.architecture'", "string value", "past the end"});
  Bytes name = one_tensor_file({}, 256);
  test::patch(name, 24 + 8 + 20 + 4 + 8 + 4, std::numeric_limits<std::uint64_t>::max());
  expect_rejected("name_length.gguf", name, {"tensor info 0", "name", "past the end"});
}

TEST_F(MalformedGguf, MetadataValues) {
  const auto file_with_value = [](const std::function<void(ByteBuilder&)>& value) {
    ByteBuilder b;
    b.raw("GGUF").u32(3).u64(0).u64(1).str("bad.key");
    value(b);
    return b.zeros(64).bytes();
  };
  expect_rejected("value_type.gguf", file_with_value([](ByteBuilder& b) { b.u32(13); }),
                  {"metadata 'bad.key'", "value type", "13"});
  expect_rejected("array_length.gguf",
                  file_with_value([](ByteBuilder& b) { b.u32(9).u32(4).u64(kHuge); }),
                  {"metadata 'bad.key'", "array length", "1152921504606846976"});
  expect_rejected("array_strings.gguf", file_with_value([](ByteBuilder& b) {
                    b.u32(9).u32(8).u64(std::uint64_t{1} << 40);
                  }),
                  {"metadata 'bad.key'", "array length"});
  expect_rejected("array_element_type.gguf",
                  file_with_value([](ByteBuilder& b) { b.u32(9).u32(77).u64(1); }),
                  {"metadata 'bad.key'", "array element type", "77"});
  expect_rejected("bool.gguf", file_with_value([](ByteBuilder& b) { b.u32(7).u8(2); }),
                  {"metadata 'bad.key'", "bool", "2"});
  expect_rejected("nesting.gguf", file_with_value([](ByteBuilder& b) {
                    b.u32(9);
                    for (int i = 0; i < 20; ++i) b.u32(9).u64(1);
                  }),
                  {"metadata 'bad.key'", "nested"});
  ByteBuilder short_value;
  short_value.raw("GGUF").u32(3).u64(0).u64(1).str("bad.key").u32(10).u32(0);
  expect_rejected("truncated_u64.gguf", short_value.bytes(),
                  {"metadata 'bad.key'", "truncated", "uint64 value"});

  ByteBuilder twice;
  twice.raw("GGUF").u32(3).u64(0).u64(2);
  twice.str("dup").u32(4).u32(1).str("dup").u32(4).u32(2);
  expect_rejected("duplicate_key.gguf", twice.bytes(), {"metadata 'dup'", "twice"});
}

TEST_F(MalformedGguf, Alignment) {
  const auto file_with_alignment = [](std::uint32_t type, std::uint64_t value) {
    ByteBuilder b;
    b.raw("GGUF").u32(3).u64(0).u64(1).str("general.alignment").u32(type);
    if (type == 4) b.u32(static_cast<std::uint32_t>(value));
    if (type == 5) b.u32(static_cast<std::uint32_t>(value));
    if (type == 10) b.u64(value);
    if (type == 8) b.str("32");
    return b.bytes();
  };
  expect_rejected("alignment_3.gguf", file_with_alignment(4, 3),
                  {"general.alignment", "3 (uint32)", "power of two"});
  expect_rejected("alignment_0.gguf", file_with_alignment(4, 0), {"general.alignment"});
  expect_rejected("alignment_big.gguf", file_with_alignment(10, std::uint64_t{1} << 40),
                  {"general.alignment"});
  // A power of two of another integer type: the spec types it uint32, and a writer would
  // write it back as uint32 (found by fuzz_gguf's round-trip property).
  expect_rejected("alignment_int32.gguf", file_with_alignment(5, 256),
                  {"general.alignment", "256 (int32)", "uint32"});
  expect_rejected("alignment_u64.gguf", file_with_alignment(10, 64),
                  {"general.alignment", "uint64"});
  expect_rejected("alignment_string.gguf", file_with_alignment(8, 0),
                  {"general.alignment", "string"});
  // A valid non-default alignment moves the data section.
  ByteBuilder b;
  b.raw("GGUF").u32(3).u64(1).u64(1).str("general.alignment").u32(4).u32(256);
  b.str("w").u32(1).u64(8).u32(0).u64(0).pad_to(256).zeros(32);
  const std::string path = dir_.file("alignment_256.gguf");
  test::write_file_bytes(path, b.bytes());
  const GgufReader reader(path);
  EXPECT_EQ(reader.alignment(), 256u);
  EXPECT_EQ(reader.data_offset(), 256u);
}

TEST_F(MalformedGguf, TensorInfos) {
  expect_rejected("n_dims_5.gguf", one_tensor_file({.n_dims = 5, .dims = {1, 1, 1, 1, 32}}, 256),
                  {"tensor 'w'", "n_dims is 5"});
  expect_rejected("n_dims_0.gguf", one_tensor_file({.n_dims = 0, .dims = {}}, 256),
                  {"tensor 'w'", "n_dims is 0"});
  expect_rejected("dims_overflow.gguf",
                  one_tensor_file({.dims = {std::uint64_t{1} << 32, std::uint64_t{1} << 32}}, 256),
                  {"tensor 'w'", "dims [4294967296, 4294967296]", "overflows"});
  expect_rejected("dim_huge.gguf",
                  one_tensor_file({.dims = {std::numeric_limits<std::uint64_t>::max(), 1}}, 256),
                  {"tensor 'w'", "overflows"});
  expect_rejected("bytes_overflow.gguf",
                  one_tensor_file({.dims = {std::uint64_t{1} << 62, 1}, .type = 0}, 256),
                  {"tensor 'w'", "data size", "overflows"});
  expect_rejected("type_99.gguf", one_tensor_file({.type = 99}, 256),
                  {"tensor 'w'", "ggml type id 99"});
  expect_rejected("type_retired.gguf", one_tensor_file({.type = 4}, 256),
                  {"tensor 'w'", "ggml type id 4"});
  expect_rejected("block.gguf", one_tensor_file({.dims = {33, 2}, .type = 8}, 256),
                  {"tensor 'w'", "dims[0] = 33", "Q8_0", "32"});
  expect_rejected("misaligned.gguf", one_tensor_file({.offset = 4}, 512),
                  {"tensor 'w'", "offset 4", "alignment 32"});
  expect_rejected("offset_past_end.gguf", one_tensor_file({.offset = 1 << 20}, 256),
                  {"tensor 'w'", "offset 1048576 + size 256", "past the end of the file"});
  expect_rejected("offset_huge.gguf",
                  one_tensor_file({.offset = std::numeric_limits<std::uint64_t>::max() - 31}, 256),
                  {"tensor 'w'", "past the end of the file"});
  expect_rejected("size_past_end.gguf", one_tensor_file({.dims = {32, 3}}, 256),
                  {"tensor 'w'", "offset 0 + size 384", "past the end of the file"});
  expect_rejected("truncated_dims.gguf",
                  [] {
                    ByteBuilder b;
                    b.raw("GGUF").u32(3).u64(1).u64(0).str("blk.0.attn_q.weight").u32(3).u64(8);
                    return b.bytes();
                  }(),
                  {"tensor 'blk.0.attn_q.weight'", "truncated", "dims[1]"});

  ByteBuilder twice;
  twice.raw("GGUF").u32(3).u64(2).u64(0);
  twice.str("w").u32(1).u64(8).u32(0).u64(0);
  twice.str("w").u32(1).u64(8).u32(0).u64(32);
  twice.pad_to(32).zeros(64);
  expect_rejected("duplicate_tensor.gguf", twice.bytes(), {"tensor 'w'", "twice"});
}

// ---- the real file, cut and patched ----

class RealGgufDamage : public MalformedGguf {
 protected:
  void SetUp() override {
    original_ = test::read_file_bytes(test::model_path("stories260K/stories260K.gguf"));
    ASSERT_EQ(original_.size(), 1185376u);
  }
  // Offset of the first occurrence of `text` (a tensor name inside the tensor infos).
  std::size_t find(std::string_view text) const {
    const auto it = std::search(original_.begin(), original_.end(), text.begin(), text.end());
    EXPECT_NE(it, original_.end());
    return static_cast<std::size_t>(it - original_.begin());
  }
  Bytes original_;
};

TEST_F(RealGgufDamage, EveryTruncationIsAnError) {
  std::vector<std::size_t> cuts;
  for (std::size_t cut = 0; cut < 80; ++cut) cuts.push_back(cut);
  for (std::size_t cut = 80; cut < 14200; cut += 61) cuts.push_back(cut);
  for (std::size_t cut = 14100; cut < 14200; ++cut) cuts.push_back(cut);  // end of infos, padding
  for (std::size_t cut = 14200; cut < original_.size(); cut += 37'813) cuts.push_back(cut);
  cuts.push_back(original_.size() - 1);

  const std::string path = dir_.file("cut.gguf");
  for (const std::size_t cut : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    test::write_file_bytes(path, original_.data(), cut);
    const std::string message = expect_error([&] { GgufReader reader(path); }, {"cut.gguf"});
    const bool names_problem = message.find("truncated") != std::string::npos ||
                               message.find("past the end") != std::string::npos;
    EXPECT_TRUE(names_problem) << message;
    const bool names_field = message.find("header") != std::string::npos ||
                             message.find("metadata") != std::string::npos ||
                             message.find("tensor") != std::string::npos;
    EXPECT_TRUE(names_field) << message;
  }
}

TEST_F(RealGgufDamage, PatchedHeaderFields) {
  // Offsets from the spec: magic 0, version 4, tensor_count 8, kv count 16, first key at 24.
  ASSERT_EQ(std::string(reinterpret_cast<const char*>(&original_[32]), 21),
            "tokenizer.ggml.tokens");
  Bytes magic = original_;
  magic[0] = 'g';
  expect_rejected("real_magic.gguf", magic, {"magic", "gGUF"});
  Bytes tensor_count = original_;
  test::patch(tensor_count, 8, kHuge);
  expect_rejected("real_tensor_count.gguf", tensor_count, {"tensor_count"});
  Bytes kv_count = original_;
  test::patch(kv_count, 16, kHuge);
  expect_rejected("real_kv_count.gguf", kv_count, {"metadata_kv_count"});
  // The tokens array: key (8 + 21 bytes), value type 9, element type 8, then the count.
  Bytes tokens = original_;
  test::patch(tokens, 24 + 8 + 21 + 4 + 4, std::uint64_t{1} << 61);
  expect_rejected("real_array.gguf", tokens, {"metadata 'tokenizer.ggml.tokens'", "array length"});
  Bytes string_length = original_;
  test::patch(string_length, 24 + 8 + 21 + 4 + 4 + 8, std::uint64_t{1} << 50);
  expect_rejected("real_string.gguf", string_length,
                  {"metadata 'tokenizer.ggml.tokens'", "string value", "past the end"});
}

TEST_F(RealGgufDamage, PatchedTensorInfos) {
  // Tensor info: u64 name length, name, u32 n_dims, u64 dims[2], u32 type, u64 offset.
  const std::size_t name = find("token_embd.weight");
  const std::size_t n_dims = name + 17, dims = n_dims + 4, type = dims + 16, offset = type + 4;
  Bytes bad_type = original_;
  test::patch(bad_type, type, std::uint32_t{99});
  expect_rejected("real_type.gguf", bad_type, {"tensor 'token_embd.weight'", "ggml type id 99"});
  Bytes bad_dims = original_;
  test::patch(bad_dims, n_dims, std::uint32_t{7});
  expect_rejected("real_n_dims.gguf", bad_dims, {"tensor 'token_embd.weight'", "n_dims is 7"});
  Bytes big_rows = original_;
  test::patch(big_rows, dims + 8, std::uint64_t{1} << 40);
  expect_rejected("real_rows.gguf", big_rows, {"tensor 'token_embd.weight'", "past the end"});
  Bytes misaligned = original_;
  test::patch(misaligned, offset, std::uint64_t{3});
  expect_rejected("real_offset.gguf", misaligned,
                  {"tensor 'token_embd.weight'", "offset 3", "alignment"});
  Bytes past_end = original_;
  test::patch(past_end, find("blk.4.ffn_norm.weight") + 21 + 4 + 8 + 4, std::uint64_t{1171008});
  expect_rejected("real_past_end.gguf", past_end,
                  {"tensor 'blk.4.ffn_norm.weight'",
                   "offset 1171008 + size 256 is past the end of the file (size 1185376"});
  Bytes q8 = original_;  // F32 -> Q8_0 changes the size but is still inside the file
  test::patch(q8, type, std::uint32_t{8});
  const std::string path = dir_.file("real_q8.gguf");
  test::write_file_bytes(path, q8);
  const GgufReader reader(path);
  EXPECT_EQ(reader.tensor("token_embd.weight").byte_size, 512u * 2 * 34);
}

}  // namespace
}  // namespace qforge
