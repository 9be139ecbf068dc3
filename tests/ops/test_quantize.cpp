// Round trip: every element satisfies |w - deq(q(w))| <= s/2 (+ float rounding) for every
// scheme, on random and adversarial data.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "jit/base/error.h"
#include "ops/quant/quantize.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

const char* const kSchemes[] = {"int8",        "int8-asym",       "int4",      "int4-asym",
                                "int8-g32",    "int8-g32-asym",   "int4-g32",  "int4-g32-asym",
                                "int8-g36",    "int4-g40-asym",   "int8-g128", "int4-g128",
                                "int8-tensor", "int4-tensor-asym"};

void expect_round_trip(const std::vector<float>& w, std::int64_t n, std::int64_t k,
                       const char* scheme_name, const char* data_name) {
  const QuantScheme scheme = parse_quant_scheme(scheme_name);
  const QuantizedTensor t = quantize_reference(w.data(), n, k, scheme);
  const std::vector<float> back = dequantize(t);
  const int q_lo = scheme.bits == 8 ? (scheme.asymmetric ? 0 : -127) : (scheme.asymmetric ? 0 : -8);
  const int q_hi =
      scheme.bits == 8 ? (scheme.asymmetric ? 255 : 127) : (scheme.asymmetric ? 15 : 7);
  int failures = 0;
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < k; ++c) {
      const std::int64_t gi = r * t.groups() + c / t.group;
      const float s = t.scales[gi];
      const float value = w[r * k + c];
      const int q = t.q[r * t.k_padded + c];
      // Asymmetric weights carry an f16 offset: half an f16 ulp (2^-11 relative) more.
      const double offset_rounding =
          scheme.asymmetric
              ? std::fabs(s * (scheme.bits == 8 ? 128 - t.zero_points[gi] : -t.zero_points[gi])) *
                    0x1p-11
              : 0.0;
      // Symmetric int4 puts the group's extreme on -8 (d = extreme / -8, negative when the
      // extreme is positive): values of the other sign beyond 7.5 |d| clip to 7, within |d|.
      const bool clipped_top = !scheme.asymmetric && scheme.bits < 8 && q == q_hi;
      const double tolerance = std::fabs(s) * (clipped_top ? 1.0 : 0.5) * (1 + 1e-5) +
                               1e-6 * std::fabs(value) + offset_rounding + 256 * FLT_TRUE_MIN;
      const double error = std::fabs(double(value) - double(back[r * k + c]));
      if ((error > tolerance || q < q_lo || q > q_hi) && failures++ < 5)
        ADD_FAILURE() << scheme_name << " on " << data_name << " [" << r << "][" << c << "]: w "
                      << value << " deq " << back[r * k + c] << " s " << s << " q " << q;
      if (s == 0.f && value != 0.f && std::fabs(value) > 256 * FLT_TRUE_MIN && failures++ < 5)
        ADD_FAILURE() << "zero scale for a non-zero value " << value;
    }
  // Symmetric int4 uses all 16 levels: every group whose scale is a normal f16 (not
  // rounded up from a tinier one) holds a -8.
  if (!scheme.asymmetric && scheme.bits < 8)
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t j = 0; j < t.groups(); ++j) {
        if (std::fabs(t.scales[r * t.groups() + j]) < 0x1p-14f) continue;
        bool lowest = false;
        for (std::int64_t c = j * t.group; c < std::min(k, (j + 1) * t.group); ++c)
          lowest = lowest || t.q[r * t.k_padded + c] == q_lo;
        if (!lowest && failures++ < 5)
          ADD_FAILURE() << scheme_name << " on " << data_name << " row " << r << " group " << j
                        << ": no value on " << q_lo;
      }
  // Padding quantizes zero exactly.
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = k; c < t.k_padded; ++c) {
      const std::int64_t gi = r * t.groups() + c / t.group;
      EXPECT_EQ(t.q[r * t.k_padded + c], t.scales[gi] == 0.f ? 0 : t.zero_points[gi]);
    }
}

TEST(Quantize, RoundTripRandom) {
  for (const char* scheme : kSchemes)
    for (int k : {4, 36, 100, 256, 300}) {
      const std::int64_t n = 7;
      expect_round_trip(test::random_floats(n * k, 100 + k, 0.02f), n, k, scheme, "normal");
      expect_round_trip(test::random_uniform(n * k, 200 + k, 0.1f, 3.f), n, k, scheme, "positive");
      expect_round_trip(test::random_uniform(n * k, 300 + k, -5.f, -0.5f), n, k, scheme,
                        "negative");
    }
}

TEST(Quantize, RoundTripAdversarial) {
  const std::int64_t n = 4, k = 128;
  for (const char* scheme : kSchemes) {
    std::vector<float> zeros(n * k, 0.f);
    expect_round_trip(zeros, n, k, scheme, "all zero");

    std::vector<float> outlier = test::random_floats(n * k, 5, 0.01f);
    outlier[37] = 1000.f;
    outlier[k + 90] = -2500.f;
    expect_round_trip(outlier, n, k, scheme, "outlier");

    std::vector<float> constant(n * k);
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t c = 0; c < k; ++c) constant[r * k + c] = r == 0 ? 0.75f : -3.25f * r;
    expect_round_trip(constant, n, k, scheme, "constant rows");

    std::vector<float> denormal = test::random_floats(n * k, 6, 1.f);
    for (auto& v : denormal) v *= 1e-39f;  // subnormal range
    expect_round_trip(denormal, n, k, scheme, "denormals");

    std::vector<float> tiny(n * k, 0.f);
    tiny[3] = FLT_TRUE_MIN;
    tiny[k + 5] = -3 * FLT_TRUE_MIN;
    expect_round_trip(tiny, n, k, scheme, "smallest subnormals");

    std::vector<float> ties(n * k);
    for (std::int64_t i = 0; i < n * k; ++i) ties[i] = static_cast<float>(i % 17) - 8.f;
    expect_round_trip(ties, n, k, scheme, "integers (rounding ties)");

    // Scales and offsets are f16: a group's scale is at most 65504, so is an asymmetric
    // group's offset (about its minimum).
    std::vector<float> large = test::random_floats(n * k, 7, 1e4f);
    expect_round_trip(large, n, k, scheme, "large");
    const std::vector<float> huge = test::random_floats(n * k, 7, 1e36f);
    try {
      quantize_reference(huge.data(), n, k, parse_quant_scheme(scheme));
      ADD_FAILURE() << scheme << ": a range beyond the f16 scales was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("f16"), std::string::npos) << e.what();
    }
  }
}

TEST(Quantize, SymmetricIsExactOnTheGrid) {
  // Values that are exact multiples of the scale come back exactly.
  std::vector<float> w(2 * 64);
  for (int i = 0; i < 128; ++i) w[i] = 0.5f * static_cast<float>((i % 255) - 127) / 127.f * 127.f;
  w[0] = 63.5f;    // row 0: max |w| = 63.5 -> s = 0.5
  w[64] = -63.5f;  // row 1 likewise
  const QuantizedTensor t = quantize_reference(w.data(), 2, 64, parse_quant_scheme("int8"));
  const std::vector<float> back = dequantize(t);
  for (int i = 0; i < 128; ++i) EXPECT_EQ(back[i], w[i]) << i;
}

TEST(Quantize, RejectsBadInput) {
  std::vector<float> w(64, 1.f);
  w[10] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(quantize_reference(w.data(), 1, 64, parse_quant_scheme("int8")), Error);
  w[10] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_reference(w.data(), 1, 64, parse_quant_scheme("int4-g32")), Error);
  EXPECT_THROW(quantize_reference(nullptr, 1, 64, parse_quant_scheme("int8")), Error);
  w[10] = 0.f;
  EXPECT_THROW(quantize_reference(w.data(), 1, 0, parse_quant_scheme("int8")), Error);
  QuantScheme odd{8, false, Granularity::per_group, 30};
  EXPECT_THROW(quantize_reference(w.data(), 1, 60, odd), Error);
}

}  // namespace
}  // namespace qforge
