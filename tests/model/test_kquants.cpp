// K-quant and Q5 blocks: each test builds blocks from chosen integers (sub-block scales,
// minima, quants) by placing their bits where ggml's block definitions put them (the
// encoding direction, written here from the definitions), and checks that qforge's
// decoder gives ggml's formula for them, w = d * sc * q - dmin * m, bit for bit: random
// blocks, zero blocks, the largest and sub-normal f16 scales. A model holding such
// tensors loads and runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/ggml_kquants.h"
#include "model/format/ggml_quants.h"
#include "model/format/gguf_writer.h"
#include "model/runtime/model_session.h"
#include "tests/model/tiny_llama.h"
#include "tests/support/temp_path.h"

namespace qforge {
namespace {

// Random finite f16 bit patterns, sub-normals and the extremes included.
struct Rng {
  std::mt19937 gen;
  explicit Rng(unsigned seed) : gen(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  std::uint16_t f16(int round) {
    switch (round % 8) {
      case 0:
        return 0;  // a zero scale: the block decodes to zeros (or -m)
      case 1:
        return 0x7bff;  // 65504
      case 2:
        return static_cast<std::uint16_t>(uniform(1, 0x3ff));  // sub-normal
      default:
        return static_cast<std::uint16_t>(uniform(0, 0x7bff) | (uniform(0, 1) << 15));
    }
  }
};

void put16(std::vector<std::byte>& b, std::size_t at, std::uint16_t v) {
  std::memcpy(b.data() + at, &v, 2);
}
void orbits(std::vector<std::byte>& b, std::size_t at, int bits) {
  b[at] |= static_cast<std::byte>(bits);
}
float h(std::uint16_t bits) {
  return f16_to_f32(bits);
}

std::vector<float> decode(GgmlType type, const std::vector<std::byte>& block, std::size_t n) {
  std::vector<float> out(n);
  dequantize_row(type, block, out);
  return out;
}

void expect_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what,
                 int round) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
        << what << " round " << round << " value " << i << ": " << got[i] << " vs " << want[i];
}

TEST(KQuants, Q4KAndQ5K) {
  Rng rng(1);
  for (bool five : {false, true})
    for (int round = 0; round < 64; ++round) {
      std::vector<std::byte> b(five ? 176 : 144);
      const std::uint16_t d = rng.f16(round), dmin = rng.f16(round + 3);
      put16(b, 0, d);
      put16(b, 2, dmin);
      int sc[8], m[8], q[256];
      for (int j = 0; j < 8; ++j) {
        sc[j] = rng.uniform(0, 63);
        m[j] = rng.uniform(0, 63);
      }
      for (int& v : q) v = rng.uniform(0, five ? 31 : 15);
      // 12 scale bytes at 4: scales 0..3 and minima 0..3 in bytes 0..7's low six bits;
      // 4..7 split: low nibbles in bytes 8..11 (scale low, min high), top two bits in the
      // top bits of bytes 0..3 (scales) and 4..7 (minima).
      for (int j = 0; j < 4; ++j) {
        orbits(b, 4 + j, sc[j] | (sc[j + 4] >> 4) << 6);
        orbits(b, 4 + j + 4, m[j] | (m[j + 4] >> 4) << 6);
        orbits(b, 4 + j + 8, (sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
      }
      const std::size_t qs = five ? 48 : 16;
      for (int i = 0; i < 4; ++i)
        for (int l = 0; l < 32; ++l) {
          const int lo = q[64 * i + l], hi = q[64 * i + 32 + l];
          orbits(b, qs + 32 * i + l, (lo & 15) | (hi & 15) << 4);
          if (five) orbits(b, 16 + l, (lo >> 4) << (2 * i) | (hi >> 4) << (2 * i + 1));
        }
      std::vector<float> want(256);
      for (int v = 0; v < 256; ++v) {
        const int s = v / 32;
        const float dl = h(d) * static_cast<float>(sc[s]), ml = h(dmin) * static_cast<float>(m[s]);
        want[v] = dl * static_cast<float>(q[v]) - ml;
      }
      expect_bits(decode(five ? GgmlType::Q5_K : GgmlType::Q4_K, b, 256), want,
                  five ? "Q5_K" : "Q4_K", round);
    }
}

TEST(KQuants, Q6K) {
  Rng rng(2);
  for (int round = 0; round < 64; ++round) {
    std::vector<std::byte> b(210);
    int q[256], sc[16];
    for (int& v : q) v = rng.uniform(0, 63);
    for (int& v : sc) v = rng.uniform(-128, 127);
    const std::uint16_t d = rng.f16(round);
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; ++l) {
        const int* v = q + 128 * half + l;  // values l, l + 32, l + 64, l + 96 of the half
        orbits(b, 64 * half + l, (v[0] & 15) | (v[64] & 15) << 4);
        orbits(b, 64 * half + l + 32, (v[32] & 15) | (v[96] & 15) << 4);
        orbits(b, 128 + 32 * half + l,
               (v[0] >> 4) | (v[32] >> 4) << 2 | (v[64] >> 4) << 4 | (v[96] >> 4) << 6);
      }
    for (int i = 0; i < 16; ++i)
      b[192 + i] = static_cast<std::byte>(static_cast<std::int8_t>(sc[i]));
    put16(b, 208, d);
    std::vector<float> want(256);
    for (int v = 0; v < 256; ++v)
      want[v] = h(d) * static_cast<float>(sc[v / 16]) * static_cast<float>(q[v] - 32);
    expect_bits(decode(GgmlType::Q6_K, b, 256), want, "Q6_K", round);
  }
}

TEST(KQuants, Q2KAndQ3K) {
  Rng rng(3);
  for (int round = 0; round < 64; ++round) {
    // Q2_K: value v = 128 half + 32 plane + 16 part + l sits in qs[32 half + 16 part + l]
    // at bits 2 plane; sub-block v / 16 has scale byte (min << 4 | scale).
    {
      std::vector<std::byte> b(84);
      int q[256], sc[16], m[16];
      for (int& v : q) v = rng.uniform(0, 3);
      for (int i = 0; i < 16; ++i) {
        sc[i] = rng.uniform(0, 15);
        m[i] = rng.uniform(0, 15);
        orbits(b, i, sc[i] | m[i] << 4);
      }
      for (int v = 0; v < 256; ++v)
        orbits(b, 16 + 32 * (v / 128) + v % 32, q[v] << (2 * (v % 128 / 32)));
      const std::uint16_t d = rng.f16(round), dmin = rng.f16(round + 5);
      put16(b, 80, d);
      put16(b, 82, dmin);
      std::vector<float> want(256);
      for (int v = 0; v < 256; ++v) {
        const float dl = h(d) * static_cast<float>(sc[v / 16]);
        const float ml = h(dmin) * static_cast<float>(m[v / 16]);
        want[v] = dl * static_cast<float>(q[v]) - ml;
      }
      expect_bits(decode(GgmlType::Q2_K, b, 256), want, "Q2_K", round);
    }
    // Q3_K: q in -4..3 as u = q + 4: low two bits like Q2_K, the third bit in
    // hmask[v % 32] bit v / 32; 16 six-bit scales s (value s - 32): low nibbles in bytes
    // 0..7 (scales 8..15 in the high nibbles), top two bits in byte 8 + i % 4 at 2 (i / 4).
    {
      std::vector<std::byte> b(110);
      int q[256], s[16];
      for (int& v : q) v = rng.uniform(-4, 3);
      for (int i = 0; i < 16; ++i) {
        s[i] = rng.uniform(0, 63);
        orbits(b, 96 + i % 8, (s[i] & 15) << (i < 8 ? 0 : 4));
        orbits(b, 96 + 8 + i % 4, (s[i] >> 4) << (2 * (i / 4)));
      }
      for (int v = 0; v < 256; ++v) {
        const int u = q[v] + 4;
        orbits(b, 32 + 32 * (v / 128) + v % 32, (u & 3) << (2 * (v % 128 / 32)));
        orbits(b, v % 32, (u >> 2) << (v / 32));
      }
      const std::uint16_t d = rng.f16(round);
      put16(b, 108, d);
      std::vector<float> want(256);
      for (int v = 0; v < 256; ++v)
        want[v] = h(d) * static_cast<float>(s[v / 16] - 32) * static_cast<float>(q[v]);
      expect_bits(decode(GgmlType::Q3_K, b, 256), want, "Q3_K", round);
    }
  }
}

TEST(KQuants, Q5_0AndQ5_1) {
  Rng rng(4);
  for (bool with_min : {false, true})
    for (int round = 0; round < 64; ++round) {
      std::vector<std::byte> b(with_min ? 24 : 22);
      int q[32];
      for (int& v : q) v = rng.uniform(0, 31);
      const std::uint16_t d = rng.f16(round), m = rng.f16(round + 1);
      put16(b, 0, d);
      if (with_min) put16(b, 2, m);
      const std::size_t at = with_min ? 4 : 2;
      std::uint32_t qh = 0;
      for (int i = 0; i < 32; ++i) qh |= static_cast<std::uint32_t>(q[i] >> 4) << i;
      std::memcpy(b.data() + at, &qh, 4);
      for (int j = 0; j < 16; ++j) orbits(b, at + 4 + j, (q[j] & 15) | (q[j + 16] & 15) << 4);
      std::vector<float> want(32);
      for (int i = 0; i < 32; ++i)
        want[i] = with_min ? static_cast<float>(q[i]) * h(d) + h(m)
                           : static_cast<float>(q[i] - 16) * h(d);
      expect_bits(decode(with_min ? GgmlType::Q5_1 : GgmlType::Q5_0, b, 32), want,
                  with_min ? "Q5_1" : "Q5_0", round);
    }
}

TEST(KQuants, RowsOfSeveralBlocksAndWrongSizes) {
  std::vector<std::byte> row(2 * 210);
  row[208] = std::byte{0x00};
  row[209] = std::byte{0x3c};  // block 0: d = 1
  row[192] = std::byte{1};     // block 0 sub-block 0 scale 1; every q is 0 - 32
  std::vector<float> out(512);
  dequantize_row(GgmlType::Q6_K, row, out);
  EXPECT_EQ(out[0], -32.f);
  EXPECT_EQ(out[16], 0.f);   // sub-block 1: scale 0
  EXPECT_EQ(out[256], 0.f);  // block 1: d = 0
  std::vector<float> short_out(256);
  EXPECT_THROW(dequantize_row(GgmlType::Q6_K, row, short_out), Error);
  EXPECT_THROW(ggml_row_bytes(GgmlType::Q4_K, 100), Error);  // not whole super-blocks
}

// A file whose classifier is Q6_K and whose layers are Q4_K, with attn_v and ffn_down Q6_K
// (as llama-quantize's Q4_K_M writes them): it loads natively, the K-quant layers
// repacked exactly (a q | k | v of Q4_K and Q6_K as a stack of both), and follows the f32
// run, which computes with exactly the decoded values.
// A Q4_K_M-like (or Q5_K_M-like) model: Q4_K (Q5_K) matrices, Q6_K attn_v, ffn_down and
// classifier; the native policy keeps every type, and the logits follow the f32 decode.
void run_kquant_model(GgmlType main_type) {
  const std::string path = test::temp_path("kquants", "q4km.gguf");
  test::TinyLlama spec;
  spec.dim = 256;
  spec.hidden_dim = 256;
  spec.vocab = 40;
  Rng rng(5);
  const auto blocks = [&rng](GgmlType type, std::int64_t rows, std::int64_t columns) {
    const std::uint64_t bytes = ggml_row_bytes(type, std::uint64_t(columns)) * std::uint64_t(rows);
    std::vector<std::byte> data(bytes);
    for (std::byte& x : data) x = static_cast<std::byte>(rng.uniform(0, 255));
    // Small finite scales in every block's f16 fields.
    const std::size_t block = ggml_row_bytes(type, 256);
    for (std::size_t at = 0; at < data.size(); at += block) {
      const std::uint16_t d = f32_to_f16(0.0005f), dmin = f32_to_f16(0.001f);
      if (type == GgmlType::Q6_K) {
        put16(data, at + 208, d);
      } else {
        put16(data, at, d);
        put16(data, at + 2, dmin);
      }
    }
    return data;
  };
  const auto replaced = [](const std::string& name) {
    for (const char* role :
         {".attn_q.", ".attn_k.", ".attn_v.", ".ffn_gate.", ".ffn_up.", ".ffn_down."})
      if (name.find(role) != std::string::npos) return true;
    return name == "output.weight";
  };
  spec.edit_tensor = [&](const std::string& name, std::int64_t&, std::int64_t&) {
    return !replaced(name);
  };
  spec.edit_metadata = [&](GgufWriter& writer) {  // every replaced matrix is [rows][256]
    std::vector<std::pair<std::string, std::int64_t>> tensors = {{"output.weight", spec.vocab}};
    for (int l = 0; l < spec.n_layers; ++l)
      for (const char* role : {"attn_q", "attn_k", "attn_v", "ffn_gate", "ffn_up", "ffn_down"})
        tensors.emplace_back(layer_tensor_name(l, role),
                             std::string(role) == "attn_q" || std::string(role).starts_with("ffn")
                                 ? 256
                                 : spec.n_kv_heads * (spec.dim / spec.n_heads));
    for (const auto& [name, rows] : tensors) {
      const bool six = name == "output.weight" || name.find("attn_v") != std::string::npos ||
                       name.find("ffn_down") != std::string::npos;
      const GgmlType type = six ? GgmlType::Q6_K : main_type;
      writer.add_tensor(name, type, {256, static_cast<std::uint64_t>(rows)},
                        blocks(type, rows, 256));
    }
  };
  test::write_tiny_llama(path, spec);
  const ModelFile file = open_model(path);
  EXPECT_EQ(file.tensor("output.weight").type, GgmlType::Q6_K);
  EXPECT_EQ(file.layer_tensor(0, "ffn_down").type, GgmlType::Q6_K);
  auto native = open_session(path, parse_precision("native"), 2);
  const auto& policy = native->model.weights.policy;
  const auto described = [&](const std::string& layer) {
    for (const auto& [name, what] : policy)
      if (name == layer) return what;
    return std::string("(none)");
  };
  const std::string main_name(ggml_type_name(main_type));
  EXPECT_EQ(described("blk.0.attn_qkv"), main_name + "+Q6_K");
  EXPECT_EQ(described("blk.0.ffn_gate_up"), main_name);
  EXPECT_EQ(described("blk.0.ffn_down"), "Q6_K");
  EXPECT_EQ(described("output"), "Q6_K");
  auto f32 = open_session(path, parse_precision("f32"), 2);
  const std::vector<int> tokens = {1, 5, 9};
  const std::span<const float> a = f32->executor->forward(tokens, 0, true);
  const std::vector<float> reference(a.begin(), a.end());
  const std::span<const float> b = native->executor->forward(tokens, 0, true);
  double max_abs = 0, max_diff = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    ASSERT_TRUE(std::isfinite(b[i]));
    max_abs = std::max(max_abs, double(std::fabs(reference[i])));
    max_diff = std::max(max_diff, double(std::fabs(reference[i] - b[i])));
  }
  EXPECT_GT(max_abs, 0.0);
  EXPECT_LT(max_diff / max_abs, 0.05);  // the int8 activations (the weights are exact)
  std::filesystem::remove(path);
}

TEST(KQuants, AModelOfKQuantTensorsLoadsAndRuns) {
  for (const GgmlType main_type : {GgmlType::Q4_K, GgmlType::Q5_K}) {
    SCOPED_TRACE(std::string(ggml_type_name(main_type)));
    run_kquant_model(main_type);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace qforge
