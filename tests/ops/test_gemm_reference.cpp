// The oracle checked against independent arithmetic: int32 group sums against a naive
// int64 loop over the unpacked values, outputs against a float64 matmul of the
// dequantized weights and activations, epilogues against their formulas.
#include <gtest/gtest.h>

#include <cmath>

#include "jit/base/error.h"
#include "ops/quant/pack.h"
#include "ops/ref/gemm_reference.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

struct Problem {
  std::int64_t m, n, k;
  QuantScheme scheme;
  std::vector<float> w, x;
  PackedWeights packed;
  QuantizedTensor q;
  QuantizedActivations xq;
};

Problem make_problem(std::int64_t m, std::int64_t n, std::int64_t k, const char* scheme,
                     std::uint64_t seed) {
  Problem p{m,
            n,
            k,
            parse_quant_scheme(scheme),
            test::random_floats(n * k, seed, 0.05f),
            test::random_floats(m * k, seed + 1, 1.f),
            {},
            {},
            {}};
  p.packed = pack_weights(p.w.data(), n, k, p.scheme, 2);
  p.q = unpack_weights(p.packed);
  prepare_activations(p.xq, m, k, p.packed.header.k_padded, p.packed.header.group);
  quantize_activations(p.x.data(), k, p.xq);
  return p;
}

const char* const kSchemes[] = {"int8",        "int8-asym",      "int4-g32",  "int4-g32-asym",
                                "int8-g64",    "int8-g128-asym", "int4-g256", "int4-asym",
                                "int8-tensor", "int8-g36"};

TEST(GemmReference, GroupSumsAreExact) {
  for (const char* scheme : kSchemes)
    for (auto [m, n, k] : {std::tuple{1, 1, 4}, {3, 17, 100}, {5, 33, 300}, {2, 16, 512}}) {
      const Problem p = make_problem(m, n, k, scheme, m * 100 + n + k);
      const std::int64_t groups = p.q.groups();
      std::vector<std::int32_t> sums(m * n * groups);
      group_sums_reference(p.packed, p.xq, sums.data());
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < n; ++c)
          for (std::int64_t j = 0; j < groups; ++j) {
            // sum_k xq * q (sym) or xq * operand (asym: the offset term stays float), in
            // int64 from unpacked values
            const int operand_shift = !p.scheme.asymmetric ? 0 : p.scheme.bits == 8 ? 128 : 0;
            std::int64_t expected = 0;
            for (std::int64_t i = j * p.q.group; i < (j + 1) * p.q.group; ++i)
              expected +=
                  std::int64_t{p.xq.row(r)[i]} * (p.q.q[c * p.q.k_padded + i] - operand_shift);
            ASSERT_EQ(sums[(r * n + c) * groups + j], expected)
                << scheme << " m " << r << " n " << c << " group " << j;
          }
    }
}

TEST(GemmReference, MatchesFloat64MatmulOfDequantizedOperands) {
  for (const char* scheme : kSchemes)
    for (auto [m, n, k] : {std::tuple{1, 7, 64}, {4, 33, 256}, {3, 20, 1000}}) {
      const Problem p = make_problem(m, n, k, scheme, 7 * m + n + k);
      const std::vector<float> wd = dequantize(p.q);
      std::vector<float> y(m * n);
      gemm_reference(p.packed, p.xq, Epilogue{}, EpilogueArgs{}, y.data(), n);
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t c = 0; c < n; ++c) {
          double exact = 0, magnitude = 0;
          for (std::int64_t i = 0; i < k; ++i) {
            const double xd = double(p.xq.scale[r]) * int(p.xq.row(r)[i]);
            exact += xd * wd[c * k + i];
            magnitude += std::fabs(xd * wd[c * k + i]);
          }
          EXPECT_NEAR(y[r * n + c], exact, 1e-6 * magnitude + 1e-30)
              << scheme << " " << r << "," << c;
        }
    }
}

// Q4_1-style float minima: packed and unpacked unchanged, and y = x (s q + offset)^T.
TEST(GemmReference, FloatOffsetsMatchFloat64) {
  for (auto [m, n, k, g] : {std::tuple{1, 7, 64, 32}, {4, 33, 256, 32}, {3, 20, 1000, 128}}) {
    QuantScheme scheme = parse_quant_scheme("int4-g" + std::to_string(g) + "-asym");
    const QuantizedTensor q = test::random_quantized(n, k, scheme, 40 + n, true);
    const PackedWeights packed = pack_quantized(q, 1);
    const QuantizedTensor back = unpack_weights(packed);
    EXPECT_EQ(back.q, q.q);
    EXPECT_EQ(back.scales, q.scales);
    EXPECT_EQ(back.offsets, q.offsets);
    const auto x = test::random_floats(m * k, n + 1, 1.f);
    QuantizedActivations xq;
    prepare_activations(xq, m, k, packed.header.k_padded, packed.header.group);
    quantize_activations(x.data(), k, xq);
    const std::vector<float> wd = dequantize(q);
    std::vector<float> y(m * n);
    gemm_reference(packed, xq, Epilogue{}, EpilogueArgs{}, y.data(), n);
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < n; ++c) {
        double exact = 0, magnitude = 0;
        for (std::int64_t i = 0; i < k; ++i) {
          const double xd = double(xq.scale[r]) * int(xq.row(r)[i]);
          exact += xd * wd[c * k + i];
          magnitude += std::fabs(xd * wd[c * k + i]);
        }
        EXPECT_NEAR(y[r * n + c], exact, 1e-6 * magnitude + 1e-30) << m << "," << n << "," << k;
      }
  }
}

TEST(GemmReference, Epilogues) {
  const std::int64_t m = 3, n = 21, k = 96;
  const Problem p = make_problem(m, n, k, "int8-g32", 99);
  std::vector<float> plain(m * n);
  gemm_reference(p.packed, p.xq, Epilogue{}, EpilogueArgs{}, plain.data(), n);
  const auto bias = test::random_floats(n, 5, 1.f);
  const auto residual = test::random_floats(m * 40, 6, 1.f);
  EpilogueArgs args;
  args.bias = bias.data();
  args.residual = residual.data();
  args.ld_residual = 40;
  args.out_scale = 0.01f;
  args.out_zero_point = 100;

  std::vector<float> y(m * 30, -1.f);
  gemm_reference(p.packed, p.xq, Epilogue{true, false, true, OutputKind::f32}, args, y.data(), 30);
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < n; ++c)
      EXPECT_EQ(y[r * 30 + c], plain[r * n + c] + bias[c] + residual[r * 40 + c]);
  EXPECT_EQ(y[29], -1.f);  // beyond N: untouched

  std::vector<std::uint8_t> u8(m * n);
  gemm_reference(p.packed, p.xq, Epilogue{false, false, false, OutputKind::u8}, args, u8.data(), n);
  for (std::int64_t i = 0; i < m * n; ++i) {
    const double expected = std::clamp(std::round(plain[i] / 0.01) + 100, 0.0, 255.0);
    EXPECT_NEAR(u8[i], expected, 1.0) << i;  // +-1 only where double and float round differently
  }
  EXPECT_EQ(requantize_reference(1.25f, 0.5f, 3), 6);    // 2.5 rounds away -> 3, + 3
  EXPECT_EQ(requantize_reference(-1000.f, 0.5f, 3), 0);  // saturates
  EXPECT_EQ(requantize_reference(1000.f, 0.5f, 3), 255);
}

TEST(GemmReference, SwigluOfAnInterleavedPair) {
  const std::int64_t m = 2, n = 19, k = 64;
  const auto gate = test::random_floats(n * k, 31, 0.1f), up = test::random_floats(n * k, 32, 0.1f);
  const auto x = test::random_floats(m * k, 33, 1.f);
  const QuantScheme scheme = parse_quant_scheme("int4-g32");
  const PackedWeights pair = pack_swiglu_pair(gate.data(), up.data(), n, k, scheme, 1);
  const PackedWeights g = pack_weights(gate.data(), n, k, scheme, 1);
  const PackedWeights u = pack_weights(up.data(), n, k, scheme, 1);
  QuantizedActivations xq;
  prepare_activations(xq, m, k, pair.header.k_padded, pair.header.group);
  quantize_activations(x.data(), k, xq);
  std::vector<float> y(m * n), yg(m * n), yu(m * n);
  gemm_reference(pair, xq, Epilogue{false, true, false, OutputKind::f32}, {}, y.data(), n);
  gemm_reference(g, xq, Epilogue{}, {}, yg.data(), n);
  gemm_reference(u, xq, Epilogue{}, {}, yu.data(), n);
  for (std::int64_t i = 0; i < m * n; ++i) {
    const double silu = yg[i] / (1.0 + std::exp(-double(yg[i])));
    EXPECT_NEAR(y[i], silu * yu[i], 1e-6 * std::fabs(silu * yu[i]) + 1e-12) << i;
  }
  EXPECT_THROW(
      gemm_reference(g, xq, Epilogue{false, true, false, OutputKind::f32}, {}, y.data(), n), Error);
}

TEST(GemmReference, RejectsMismatchedOperands) {
  const Problem p = make_problem(1, 16, 64, "int8", 1);
  QuantizedActivations other;
  prepare_activations(other, 1, 128, 128, 128);
  std::vector<float> y(16);
  EXPECT_THROW(gemm_reference(p.packed, other, Epilogue{}, {}, y.data(), 16), Error);
  EXPECT_THROW(gemm_reference(p.packed, p.xq, Epilogue{}, {}, nullptr, 16), Error);
  EXPECT_THROW(gemm_reference(p.packed, p.xq, Epilogue{true, false, false, OutputKind::f32}, {},
                              y.data(), 16),
               Error);
}

}  // namespace
}  // namespace qforge
