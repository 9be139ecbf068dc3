#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/gemm/woq_fields.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

TEST(Activation, FollowsTheDefinition) {
  const std::int64_t m = 3, k = 37, kp = 64, g = 32;
  const auto x = test::random_floats(m * k, 21, 2.f);
  QuantizedActivations q;
  prepare_activations(q, m, k, kp, g);
  quantize_activations(x.data(), k, q);
  for (std::int64_t r = 0; r < m; ++r) {
    float max_abs = 0;
    for (std::int64_t i = 0; i < k; ++i) max_abs = std::max(max_abs, std::fabs(x[r * k + i]));
    EXPECT_EQ(q.scale[r], max_abs / 127.f);
    std::int32_t sums[2] = {0, 0};
    for (std::int64_t i = 0; i < kp; ++i) {
      const int expected =
          i < k ? int(std::clamp(std::round(x[r * k + i] / q.scale[r]), -127.f, 127.f)) : 0;
      EXPECT_EQ(int(q.row(r)[i]), expected) << r << "," << i;
      sums[i / g] += expected;
    }
    EXPECT_EQ(q.sums(r)[0], sums[0]);
    EXPECT_EQ(q.sums(r)[1], sums[1]);
  }
}

TEST(Activation, VectorPathIsBitIdenticalToReference) {
  for (std::int64_t k : {1, 7, 8, 9, 64, 100, 4096}) {
    const std::int64_t m = 5, kp = (k + 63) / 64 * 64;
    auto x = test::random_floats(m * k, k, 1.f);
    // Plant rounding ties: x / a = n + 0.5 exactly when a = 1 (max |x| = 127).
    x[0] = 127.f;
    for (std::int64_t i = 1; i < k; i += 3) x[i] = static_cast<float>(i % 200 - 100) + 0.5f;
    for (std::int64_t i = 0; i < k; ++i) x[k + i] = 0.f;  // a zero row
    QuantizedActivations fast, ref;
    for (std::int64_t group : {kp, std::int64_t{32}, std::int64_t{4}}) {  // fused and not
      prepare_activations(fast, m, k, kp, group);
      prepare_activations(ref, m, k, kp, group);
      quantize_activations(x.data(), k, fast);
      quantize_activations_reference(x.data(), k, ref);
      for (std::int64_t r = 0; r < m; ++r) {
        EXPECT_EQ(fast.scale[r], ref.scale[r]);
        EXPECT_EQ(std::memcmp(fast.row(r), ref.row(r), kp), 0) << "K " << k << " row " << r;
        for (std::int64_t j = 0; j < kp / group; ++j)
          EXPECT_EQ(fast.sums(r)[j], ref.sums(r)[j]) << "K " << k << " g " << group << " j " << j;
      }
    }
    EXPECT_EQ(fast.scale[1], 0.f);
    if (k > 1) {
      EXPECT_EQ(int(fast.row(0)[1]), -99);  // -98.5 rounds away from zero
    }
  }
}

// A layer's scratch goes from a prefill chunk to one decode row and back (and the
// shared buffers of other tests from one K to another): the memory is kept, so the row
// padding must be zeroed again and every row quantized as in a fresh buffer.
TEST(Activation, ReusedBuffersQuantizeAsFreshOnes) {
  struct Shape {
    std::int64_t m, k, kp, g;
  };
  QuantizedActivations reused;
  const Shape shapes[] = {{9, 250, 256, 32}, {1, 70, 96, 32}, {9, 250, 256, 32}, {4, 37, 64, 64}};
  for (const Shape& s : shapes) {
    // A first pass with large values fills the whole row (and so the next shape's
    // padding) with non-zero bytes.
    const auto big = test::random_floats(s.m * s.kp, 5, 100.f);
    prepare_activations(reused, s.m, s.kp, s.kp, s.g);
    quantize_activations(big.data(), s.kp, reused);
    const auto x = test::random_floats(s.m * s.k, static_cast<int>(s.k), 1.f);
    prepare_activations(reused, s.m, s.k, s.kp, s.g);
    quantize_activations(x.data(), s.k, reused);
    QuantizedActivations fresh;
    prepare_activations(fresh, s.m, s.k, s.kp, s.g);
    quantize_activations(x.data(), s.k, fresh);
    ASSERT_EQ(reused.row_stride, fresh.row_stride);
    for (std::int64_t r = 0; r < s.m; ++r) {
      EXPECT_EQ(reused.scale[r], fresh.scale[r]);
      EXPECT_EQ(std::memcmp(reused.row(r), fresh.row(r), s.kp), 0) << "K " << s.k << " row " << r;
      for (std::int64_t i = s.k; i < reused.row_stride; ++i)
        ASSERT_EQ(int(reused.row(r)[i]), 0) << "padding K " << s.k << " row " << r << " at " << i;
      for (std::int64_t j = 0; j < s.kp / s.g; ++j) EXPECT_EQ(reused.sums(r)[j], fresh.sums(r)[j]);
    }
  }
}

TEST(Activation, RejectsNonFiniteAndBadShapes) {
  QuantizedActivations q;
  EXPECT_THROW(prepare_activations(q, 1, 0, 64, 64), Error);
  EXPECT_THROW(prepare_activations(q, 1, 70, 64, 64), Error);
  EXPECT_THROW(prepare_activations(q, 1, 64, 96, 64), Error);
  prepare_activations(q, 1, 8, 64, 64);
  std::vector<float> x(8, 1.f);
  x[3] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_activations(x.data(), 8, q), Error);
  EXPECT_THROW(quantize_activations(nullptr, 8, q), Error);
}

// inf, -inf or NaN anywhere in a row (8-wide body or scalar tail, any row) is refused by
// the vector path and the reference alike, naming the element.
TEST(Activation, NonFiniteElementIsNamedOnEveryPath) {
  const std::int64_t m = 3, k = 37, kp = 64;
  for (const float bad : {std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::nanf("")})
    for (const std::int64_t at : {std::int64_t{0}, std::int64_t{7}, std::int64_t{k + 20},
                                  std::int64_t{2 * k + 33}, std::int64_t{m * k - 1}})
      for (const bool reference : {false, true}) {
        auto x = test::random_floats(m * k, 77, 1.f);
        x[at] = bad;
        QuantizedActivations q;
        prepare_activations(q, m, k, kp, kp);
        const std::string expected =
            "x[" + std::to_string(at / k) + "][" + std::to_string(at % k) + "] is not finite";
        try {
          if (reference)
            quantize_activations_reference(x.data(), k, q);
          else
            quantize_activations(x.data(), k, q);
          ADD_FAILURE() << "element " << at << " = " << bad << " was quantized";
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
        }
      }
}

// Static: one scale for every row (x times its reciprocal), values beyond 127 a clamp;
// the vector path matches the definition and the reference bit for bit, every K tail and
// group layout.
TEST(Activation, StaticScaleFollowsTheDefinition) {
  int distinguishing = 0;  // elements where dividing would have given another integer
  for (std::int64_t k : {1, 7, 8, 9, 37, 100, 4096}) {
    const std::int64_t m = 4, kp = (k + 63) / 64 * 64;
    auto x = test::random_floats(m * k, 5 * k, 2.f);
    const float a = 0.0123f;  // |x| up to 2 -> up to 163: the larger ones clamp
    // Near-ties, where x * (1 / a) and x / a round apart.
    for (std::int64_t i = 0; i < k; i += 5) x[i] = (static_cast<float>(i % 100) + 0.5f) * a;
    for (std::int64_t group : {kp, std::int64_t{32}, std::int64_t{4}}) {
      QuantizedActivations fast, ref;
      prepare_activations(fast, m, k, kp, group);
      prepare_activations(ref, m, k, kp, group);
      quantize_activations_static(x.data(), k, a, fast);
      quantize_activations_static_reference(x.data(), k, a, ref);
      for (std::int64_t r = 0; r < m; ++r) {
        EXPECT_EQ(fast.scale[r], a);
        EXPECT_EQ(ref.scale[r], a);
        std::vector<std::int32_t> sums(std::size_t(kp / group), 0);
        for (std::int64_t i = 0; i < kp; ++i) {
          const int expected =
              i < k ? int(std::clamp(std::round(x[r * k + i] * (1.f / a)), -127.f, 127.f)) : 0;
          ASSERT_EQ(int(fast.row(r)[i]), expected) << "K " << k << " row " << r << " i " << i;
          sums[std::size_t(i / group)] += expected;
        }
        EXPECT_EQ(std::memcmp(fast.row(r), ref.row(r), kp), 0);
        for (std::int64_t i = 0; i < k; ++i)
          distinguishing += std::round(x[r * k + i] * (1.f / a)) != std::round(x[r * k + i] / a);
        for (std::int64_t j = 0; j < kp / group; ++j) {
          EXPECT_EQ(fast.sums(r)[j], sums[std::size_t(j)]) << "K " << k << " g " << group;
          EXPECT_EQ(ref.sums(r)[j], sums[std::size_t(j)]);
        }
      }
    }
  }
  EXPECT_GT(distinguishing, 0) << "the test data cannot tell the reciprocal from division";
}

TEST(Activation, StaticScaleRefusesBadScalesAndNonFiniteInput) {
  const std::int64_t m = 2, k = 37, kp = 64;
  QuantizedActivations q;
  prepare_activations(q, m, k, kp, kp);
  auto x = test::random_floats(m * k, 9, 1.f);
  for (const float bad_scale : {0.f, -1.f, std::numeric_limits<float>::infinity(), std::nanf("")})
    EXPECT_THROW(quantize_activations_static(x.data(), k, bad_scale, q), Error) << bad_scale;
  for (const std::int64_t at : {std::int64_t{3}, std::int64_t{k + 36}})
    for (const bool reference : {false, true}) {
      auto bad = x;
      bad[at] = std::nanf("");
      const std::string expected =
          "x[" + std::to_string(at / k) + "][" + std::to_string(at % k) + "] is not finite";
      try {
        if (reference)
          quantize_activations_static_reference(bad.data(), k, 0.01f, q);
        else
          quantize_activations_static(bad.data(), k, 0.01f, q);
        ADD_FAILURE() << "element " << at << " was quantized";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      }
    }
}

// The weight-only operand: each x[k] stored times 2^-e (e the bit position of k's operand
// field, 0 for the top field), zeros in [K, Kp) even in a buffer a larger shape used
// before, and the group sums of the unscaled values in k order.
TEST(FloatActivations, ScaledRowsZeroPaddingAndGroupSums) {
  FloatActivations big, reused;
  const auto wide = test::random_floats(3 * 300, 5, 100.f);
  prepare_float_activations(reused, 3, 300, 320, 64, 4);
  copy_float_activation_rows(wide.data(), 300, 0, 3, reused);
  for (int bits : {8, 4})
    for (std::int64_t k : {1, 37, 64, 100}) {
      const std::int64_t g = 32, kp = (k + g - 1) / g * g;
      const auto x = test::random_floats(2 * (k + 3), 7 + k, 3.f);
      prepare_float_activations(reused, 2, k, kp, g, bits);
      copy_float_activation_rows(x.data(), k + 3, 0, 2, reused);
      prepare_float_activations(big, 2, k, kp, g, bits);
      copy_float_activation_rows(x.data(), k + 3, 0, 2, big);
      for (std::int64_t r = 0; r < 2; ++r) {
        for (std::int64_t i = 0; i < kp; ++i) {
          const int fields = woq_fields_per_row(bits);
          const float want =
              i < k ? std::ldexp(x[r * (k + 3) + i],
                                 -woq_activation_exponent(bits, static_cast<int>(i % fields)))
                    : 0.f;
          ASSERT_EQ(reused.row(r)[i], want) << bits << " K " << k << " row " << r << " k " << i;
          ASSERT_EQ(big.row(r)[i], want);
          ASSERT_EQ(reused.value(r, i), i < k ? x[r * (k + 3) + i] : 0.f);
        }
        for (std::int64_t j = 0; j < kp / g; ++j) {
          float sum = 0.f;
          for (std::int64_t i = j * g; i < std::min(k, (j + 1) * g); ++i) sum += x[r * (k + 3) + i];
          EXPECT_EQ(reused.sums(r)[j], sum);
        }
      }
    }
  EXPECT_THROW(prepare_float_activations(big, 2, 64, 64, 36, 4), Error);  // g % 8 != 0
}

// bf16 rows: each packed row's 8 k as the kernel's dword pairs (k0, k2), (k4, k6), (k1, k3),
// (k5, k7), rounded to nearest even (ties planted), zeros in [K, Kp) of a reused buffer,
// group sums of the rounded values; bf16 is refused for int8 weights.
TEST(FloatActivations, Bf16PairsInTheKernelsOrder) {
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // slot -> k within the packed row
  FloatActivations reused;
  const auto wide = test::random_floats(2 * 256, 9, 50.f);
  prepare_float_activations(reused, 2, 256, 256, 64, 4, true);
  copy_float_activation_rows(wide.data(), 256, 0, 2, reused);
  for (std::int64_t k : {1, 8, 37, 100}) {
    const std::int64_t g = 32, kp = (k + g - 1) / g * g;
    auto x = test::random_floats(2 * k, 11 + k, 3.f);
    x[0] = 1.00390625f;  // 1 + 2^-8: a tie, rounds to even (1.0)
    prepare_float_activations(reused, 2, k, kp, g, 4, true);
    copy_float_activation_rows(x.data(), k, 0, 2, reused);
    for (std::int64_t r = 0; r < 2; ++r) {
      for (std::int64_t i = 0; i < kp; ++i) {
        const std::int64_t at = i / 8 * 8 + order[i % 8];
        const float want = at < k ? bf16_to_f32(f32_to_bf16(x[r * k + at])) : 0.f;
        ASSERT_EQ(bf16_to_f32(reused.pair_row(r)[i]), want) << "K " << k << " slot " << i;
        ASSERT_EQ(reused.value(r, at), want);
      }
      for (std::int64_t j = 0; j < kp / g; ++j) {
        float sum = 0.f;
        for (std::int64_t i = j * g; i < std::min(k, (j + 1) * g); ++i)
          sum += bf16_to_f32(f32_to_bf16(x[r * k + i]));
        EXPECT_EQ(reused.sums(r)[j], sum);
      }
    }
    EXPECT_EQ(reused.value(0, 0), 1.0f);
  }
  EXPECT_THROW(prepare_float_activations(reused, 2, 64, 64, 32, 8, true), Error);
}

// The vector conversion (8 values at a time where AVX2 runs) and the scalar tail give
// f32_to_bf16's bits for every kind of float: NaNs quieted, infinities, signed zeros,
// subnormals, ties to even either way, the largest finite values rounding up to infinity.
TEST(FloatActivations, Bf16RoundingOfSpecialValues) {
  const std::vector<float> specials = {std::nanf(""),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::infinity(),
                                       -0.f,
                                       0.f,
                                       std::numeric_limits<float>::denorm_min(),
                                       -1e-40f,
                                       1.00390625f /* tie, to 1 */,
                                       1.01171875f /* tie, to even above */,
                                       std::numeric_limits<float>::max(),
                                       -std::numeric_limits<float>::max(),
                                       std::bit_cast<float>(0x7f800001u) /* signalling */,
                                       std::bit_cast<float>(0xffc12345u),
                                       3.f,
                                       -2.5e-3f,
                                       65504.f,
                                       1e30f};
  const std::int64_t k = static_cast<std::int64_t>(specials.size());  // 17: 2 rows + a tail
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  FloatActivations a;
  prepare_float_activations(a, 1, k, 32, 32, 4, true);
  copy_float_activation_rows(specials.data(), k, 0, 1, a);
  for (std::int64_t i = 0; i < 32; ++i) {
    const std::int64_t at = i / 8 * 8 + order[i % 8];
    const std::uint16_t want = at < k ? f32_to_bf16(specials[std::size_t(at)]) : 0;
    EXPECT_EQ(a.pair_row(0)[i], want) << "slot " << i << " (k " << at << ")";
  }
}

}  // namespace
}  // namespace qforge
