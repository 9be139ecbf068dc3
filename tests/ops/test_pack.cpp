// Packing: unpack(pack(W)) == quantize_reference(W) exactly over the shape sweep, the
// bytes sit where DESIGN.md's layout says, and threads do not change the result.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "ops/quant/pack.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

void expect_same(const QuantizedTensor& a, const QuantizedTensor& b, const std::string& what) {
  ASSERT_EQ(a.k_padded, b.k_padded) << what;
  ASSERT_EQ(a.group, b.group) << what;
  EXPECT_TRUE(a.q == b.q) << what << ": stored values differ";
  EXPECT_TRUE(a.scales == b.scales) << what << ": scales differ";
  EXPECT_TRUE(a.zero_points == b.zero_points) << what << ": zero points differ";
}

std::vector<QuantScheme> sweep_schemes() {
  std::vector<QuantScheme> out;
  for (int bits : {8, 4})
    for (bool asym : {false, true}) {
      out.push_back({bits, asym, Granularity::per_channel, 0});
      for (int g : {32, 64, 128, 256}) out.push_back({bits, asym, Granularity::per_group, g});
    }
  return out;
}

TEST(Pack, UnpackIsIdentityOverTheSweep) {
  int cases = 0;
  for (int n = 1; n <= 33; ++n)
    for (int k = 4; k <= 300; k += 4)
      for (const QuantScheme& scheme : sweep_schemes()) {
        const auto w = test::random_floats(std::size_t(n) * k, n * 1000 + k, 0.05f);
        const QuantizedTensor expected = quantize_reference(w.data(), n, k, scheme);
        const PackedWeights packed = pack_weights(w.data(), n, k, scheme, 1);
        expect_same(unpack_weights(packed), expected,
                    to_string(scheme) + " N " + std::to_string(n) + " K " + std::to_string(k));
        ++cases;
        if (HasFailure()) return;
      }
  EXPECT_EQ(cases, 33 * 75 * 20);
}

TEST(Pack, UnpackIsIdentityAtLlamaSizes) {
  struct Shape {
    int n, k;
  };
  for (const Shape s : {Shape{4093, 256}, Shape{37, 4096}, Shape{4093, 4096}})
    for (const char* name : {"int8", "int8-g128-asym", "int4-g128", "int4-asym", "int8-tensor"}) {
      if (s.n * std::int64_t{s.k} > 4'000'000 && std::string(name) != "int4-g128") continue;
      const QuantScheme scheme = parse_quant_scheme(name);
      const auto w = test::random_floats(std::size_t(s.n) * s.k, s.n + s.k, 0.02f);
      const PackedWeights packed = pack_weights(w.data(), s.n, s.k, scheme, 2);
      expect_same(unpack_weights(packed), quantize_reference(w.data(), s.n, s.k, scheme),
                  std::string(name) + " " + std::to_string(s.n) + "x" + std::to_string(s.k));
    }
}

TEST(Pack, OtherGroupSizesAndPerTensor) {
  for (const char* name :
       {"int8-g36", "int8-g4", "int4-g8-asym", "int4-g40", "int8-tensor-asym", "int4-tensor"})
    for (int k : {4, 8, 40, 76, 200}) {
      const QuantScheme scheme = parse_quant_scheme(name);
      const auto w = test::random_floats(19 * std::size_t(k), k, 1.f);
      expect_same(unpack_weights(pack_weights(w.data(), 19, k, scheme, 3)),
                  quantize_reference(w.data(), 19, k, scheme), name);
    }
}

// Reads the packed bytes by the formula in DESIGN.md, independently of unpack_weights.
TEST(Pack, BytesSitWhereTheLayoutSays) {
  const int n = 21, k = 72;
  const auto w = test::random_floats(n * k, 9, 1.f);
  for (const char* name : {"int8-g32", "int8-g32-asym", "int4-g32", "int4-g32-asym"}) {
    const QuantScheme scheme = parse_quant_scheme(name);
    const QuantizedTensor t = quantize_reference(w.data(), n, k, scheme);
    const PackedWeights p = pack_weights(w.data(), n, k, scheme, 1);
    const std::int64_t g = 32, groups = 3;  // Kp = 96
    const std::int64_t data_bytes = scheme.bits == 8 ? g / 4 * 64 : g / 8 * 64;
    const std::int64_t group_bytes = data_bytes + (scheme.asymmetric ? 64 : 32);
    ASSERT_EQ(p.geometry.group_bytes, group_bytes);
    auto f16_at = [](const std::uint8_t* at) {
      std::uint16_t half;
      std::memcpy(&half, at, 2);
      return f16_to_f32(half);
    };
    for (int col = 0; col < n; ++col)
      for (int kk = 0; kk < 96; ++kk) {
        const std::int64_t panel = col / 16, lane = col % 16, j = kk / g, i = kk % g;
        const std::uint8_t* group = p.data.data() + panel * groups * group_bytes + j * group_bytes;
        const int q = t.q[col * 96 + kk];
        if (scheme.bits == 8) {  // the u8 operand: q + 128 (sym) or q (asym)
          const int expected = scheme.asymmetric ? q : q + 128;
          EXPECT_EQ(int{group[(i / 4) * 64 + lane * 4 + i % 4]}, expected);
        } else {
          const std::uint8_t byte = group[(i / 8) * 64 + lane * 4 + i % 4];
          const int nibble = (i % 8) < 4 ? byte & 15 : byte >> 4;
          EXPECT_EQ(nibble, scheme.asymmetric ? q : q + 8);
        }
        if (i == 0) {  // the trailer: f16 scales, then f16 offsets (w = s * v + offset)
          const float scale = f16_at(group + data_bytes + 2 * lane);
          EXPECT_EQ(scale, t.scales[col * groups + j]);
          EXPECT_EQ(f32_to_f16(scale), f32_to_f16(t.scales[col * groups + j]));
          if (scheme.asymmetric) {
            const float offset = f16_at(group + data_bytes + 32 + 2 * lane);
            const int z = t.zero_points[col * groups + j];
            EXPECT_EQ(offset,
                      f16_to_f32(f32_to_f16(scale * float(scheme.bits == 8 ? 128 - z : -z))));
          }
        }
      }
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p.data.data()) % 64, 0u);
  }
}

TEST(Pack, ThreadsDoNotChangeTheBytes) {
  const auto w = test::random_floats(100 * 256, 3, 1.f);
  const QuantScheme scheme = parse_quant_scheme("int4-g64-asym");
  const PackedWeights one = pack_weights(w.data(), 100, 256, scheme, 1);
  const PackedWeights many = pack_weights(w.data(), 100, 256, scheme, 5);
  ASSERT_EQ(one.geometry.total_bytes, many.geometry.total_bytes);
  EXPECT_EQ(std::memcmp(one.data.data(), many.data.data(), one.geometry.total_bytes), 0);
}

// A RowSource over the row-major matrix `w` (K columns) that counts, per row, how often
// it was read; the packing threads call it concurrently.
class CountingRows {
 public:
  CountingRows(const std::vector<float>& w, std::int64_t n, std::int64_t k)
      : w_(w), k_(k), reads_(static_cast<std::size_t>(n)) {}
  RowSource source() {
    return [this](std::int64_t first, std::int64_t count, float* out) {
      std::memcpy(out, w_.data() + first * k_, sizeof(float) * count * k_);
      std::lock_guard<std::mutex> lock(mutex_);
      for (std::int64_t r = first; r < first + count; ++r) ++reads_[r];
    };
  }
  // Whether every row was read exactly once.
  bool each_row_once() const {
    return std::all_of(reads_.begin(), reads_.end(), [](int n) { return n == 1; });
  }

 private:
  const std::vector<float>& w_;
  std::int64_t k_;
  std::mutex mutex_;
  std::vector<int> reads_;
};

// Packing 16 rows at a time gives the bytes of packing the whole matrix (tall, narrow,
// N tails), reading each row once.
TEST(Pack, ByRowsMatchesTheWholeMatrix) {
  struct Shape {
    std::int64_t n, k;
    const char* scheme;
  };
  for (const Shape& s : {Shape{4099, 256, "int8"}, Shape{70001, 64, "int4-g32-asym"},
                         Shape{37, 96, "int8-g32"}, Shape{2000, 1000, "int4-g128"}}) {
    const auto w = test::random_floats(s.n * s.k, 9, 1.f);
    const QuantScheme scheme = parse_quant_scheme(s.scheme);
    const PackedWeights whole = pack_weights(w.data(), s.n, s.k, scheme, 2);
    CountingRows rows(w, s.n, s.k);
    const PackedWeights by_rows = pack_weights_by_rows(s.n, s.k, scheme, rows.source(), 2);
    EXPECT_TRUE(rows.each_row_once()) << s.n << " x " << s.k;
    ASSERT_EQ(whole.geometry.total_bytes, by_rows.geometry.total_bytes);
    EXPECT_EQ(std::memcmp(whole.data.data(), by_rows.data.data(), whole.geometry.total_bytes), 0)
        << s.n << " x " << s.k << " " << s.scheme;
  }
  EXPECT_THROW(pack_weights_by_rows(16, 64, parse_quant_scheme("int8-tensor"),
                                    [](std::int64_t, std::int64_t, float*) {}),
               Error);
}

// The same for an interleaved gate/up pair: both sources are read 16 rows at a time and
// the bytes are those of packing the two whole matrices.
TEST(Pack, SwigluPairByRowsMatchesTheWholePair) {
  struct Shape {
    std::int64_t n, k;
    const char* scheme;
  };
  for (const Shape& s : {Shape{5000, 1024, "int8"}, Shape{37, 96, "int4-g32-asym"},
                         Shape{3001, 2048, "int4-g128"}}) {
    const auto gate = test::random_floats(s.n * s.k, 19, 1.f);
    const auto up = test::random_floats(s.n * s.k, 20, 1.f);
    const QuantScheme scheme = parse_quant_scheme(s.scheme);
    const PackedWeights whole = pack_swiglu_pair(gate.data(), up.data(), s.n, s.k, scheme, 2);
    CountingRows gate_rows(gate, s.n, s.k), up_rows(up, s.n, s.k);
    const PackedWeights by_rows =
        pack_swiglu_pair_by_rows(s.n, s.k, scheme, gate_rows.source(), up_rows.source(), 2);
    EXPECT_TRUE(gate_rows.each_row_once()) << s.n;
    EXPECT_TRUE(up_rows.each_row_once()) << s.n;
    ASSERT_EQ(whole.geometry.total_bytes, by_rows.geometry.total_bytes);
    EXPECT_EQ(std::memcmp(whole.data.data(), by_rows.data.data(), whole.geometry.total_bytes), 0)
        << s.n << " x " << s.k << " " << s.scheme;
  }
}

TEST(Pack, QuantizedTensorPacksExactly) {
  const auto w = test::random_floats(40 * 96, 4, 1.f);
  for (const char* name : {"int8-g32", "int4-g32", "int4-g32-asym", "int8-asym"}) {
    const QuantizedTensor t = quantize_reference(w.data(), 40, 96, parse_quant_scheme(name));
    expect_same(unpack_weights(pack_quantized(t)), t, name);
  }
  QuantizedTensor bad = quantize_reference(w.data(), 40, 96, parse_quant_scheme("int4-g32"));
  bad.q[5] = 9;  // outside [-8, 7]
  EXPECT_THROW(pack_quantized(bad), Error);
}

// Rows already quantized (operands + params, 16 at a time) pack to the bytes of packing
// the whole QuantizedTensor: every scheme kind, N and K tails, a pair, Q4_1-style float
// offsets, and each row read once.
TEST(Pack, OperandRowsPackLikeTheQuantizedTensor) {
  struct Shape {
    std::int64_t n, k;
    const char* scheme;
  };
  const auto source = [](const QuantizedTensor& t, std::vector<int>& reads) {
    return [&t, &reads](std::int64_t first, std::int64_t count, std::uint8_t* operands,
                        GroupParams* params) {
      const int bits = t.scheme.bits;
      const bool asym = t.scheme.asymmetric;
      for (std::int64_t r = first; r < first + count; ++r) {
        ++reads[static_cast<std::size_t>(r)];
        for (std::int64_t c = 0; c < t.k_padded; ++c)
          *operands++ = static_cast<std::uint8_t>(
              operand_of(t.q[static_cast<std::size_t>(r * t.k_padded + c)], bits, asym));
        for (std::int64_t j = 0; j < t.groups(); ++j) {
          const auto at = static_cast<std::size_t>(r * t.groups() + j);
          *params++ = {t.scales[at], t.zero_points[at], t.offsets.empty() ? 0.f : t.offsets[at]};
        }
      }
    };
  };
  for (const Shape& s : {Shape{4099, 256, "int8"}, Shape{37, 96, "int4-g32-asym"},
                         Shape{300, 200, "int4"}, Shape{33, 1000, "int8-g128-asym"},
                         Shape{17, 96, "int8-tensor"}, Shape{64, 64, "int4-g16"}}) {
    const QuantScheme scheme = parse_quant_scheme(s.scheme);
    const auto w = test::random_floats(s.n * s.k, 31, 1.f);
    const auto w2 = test::random_floats(s.n * s.k, 32, 1.f);
    QuantizedTensor t = quantize_reference(w.data(), s.n, s.k, scheme);
    const QuantizedTensor u = quantize_reference(w2.data(), s.n, s.k, scheme);
    if (scheme.bits == 4 && scheme.asymmetric) {  // float minima, as GGUF Q4_1 carries
      std::fill(t.zero_points.begin(), t.zero_points.end(), 0);
      t.offsets.resize(t.scales.size());
      for (std::size_t i = 0; i < t.offsets.size(); ++i) t.offsets[i] = -0.25f * float(i % 7);
    }
    std::vector<int> reads(static_cast<std::size_t>(s.n), 0), up_reads(reads);
    const PackedWeights by_rows = pack_operands_by_rows(s.n, s.k, scheme, source(t, reads), 2);
    const PackedWeights whole = pack_quantized(t, 2);
    EXPECT_TRUE(std::all_of(reads.begin(), reads.end(), [](int r) { return r == 1; })) << s.scheme;
    ASSERT_EQ(whole.geometry.total_bytes, by_rows.geometry.total_bytes);
    EXPECT_EQ(std::memcmp(whole.data.data(), by_rows.data.data(), whole.geometry.total_bytes), 0)
        << s.n << " x " << s.k << " " << s.scheme;
    std::fill(reads.begin(), reads.end(), 0);
    const PackedWeights pair =
        pack_operand_pair_by_rows(s.n, s.k, scheme, source(t, reads), source(u, up_reads), 2);
    const PackedWeights whole_pair = pack_quantized_pair(t, u, 2);
    ASSERT_EQ(whole_pair.geometry.total_bytes, pair.geometry.total_bytes);
    EXPECT_EQ(std::memcmp(whole_pair.data.data(), pair.data.data(), pair.geometry.total_bytes), 0)
        << s.scheme << " pair";
  }
}

TEST(Pack, SwigluPairInterleavesPanels) {
  const int n = 20, k = 64;
  const auto gate = test::random_floats(n * k, 11, 1.f);
  const auto up = test::random_floats(n * k, 12, 1.f);
  const QuantScheme scheme = parse_quant_scheme("int8");
  const PackedWeights pair = pack_swiglu_pair(gate.data(), up.data(), n, k, scheme, 2);
  expect_same(unpack_weights(pair, 0), quantize_reference(gate.data(), n, k, scheme), "gate");
  expect_same(unpack_weights(pair, 1), quantize_reference(up.data(), n, k, scheme), "up");
  // Panel 1 is the up half of columns 0..15.
  const PackedWeights up_only = pack_weights(up.data(), n, k, scheme, 1);
  EXPECT_EQ(std::memcmp(pair.panel(1), up_only.panel(0), pair.geometry.panel_bytes), 0);
}

TEST(Pack, RejectsBadInput) {
  std::vector<float> w(64, 1.f);
  EXPECT_THROW(pack_weights(nullptr, 1, 64, parse_quant_scheme("int8")), Error);
  EXPECT_THROW(pack_weights(w.data(), 1, 0, parse_quant_scheme("int8")), Error);
  w[63] = std::nanf("");
  EXPECT_THROW(pack_weights(w.data(), 1, 64, parse_quant_scheme("int8")), Error);
}

// A non-finite weight anywhere (inside the 8-wide body of a group or in its tail, any
// row, either half of a SwiGLU pair) is refused with the row named, whatever the scheme.
TEST(Pack, NonFiniteWeightsAreNamed) {
  const std::int64_t n = 37, k = 100;
  for (const char* scheme : {"int8", "int8-g32", "int4-g32-asym", "int4-g128", "int8-tensor"})
    for (const float bad :
         {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
          std::numeric_limits<float>::quiet_NaN()})
      for (const std::int64_t at :
           {std::int64_t{0}, std::int64_t{5 * k + 3}, std::int64_t{20 * k + 97}, n * k - 1}) {
        std::vector<float> w(n * k, 0.25f);
        w[at] = bad;
        try {
          (void)pack_weights(w.data(), n, k, parse_quant_scheme(scheme));
          ADD_FAILURE() << scheme << ": weight " << at << " = " << bad << " was packed";
        } catch (const Error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("not finite"), std::string::npos) << what;
          if (std::string(scheme) != "int8-tensor") {
            EXPECT_NE(what.find("row " + std::to_string(at / k)), std::string::npos) << what;
          }
        }
        std::vector<float> up(n * k, 0.5f);
        up[at] = bad;
        EXPECT_THROW((void)pack_swiglu_pair(w.data(), up.data(), n, k, parse_quant_scheme(scheme)),
                     Error);
      }
}

}  // namespace
}  // namespace qforge
