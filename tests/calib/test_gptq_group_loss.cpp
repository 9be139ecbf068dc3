// The clipping search's group losses: the AVX2 implementation gives the scalar
// definition's doubles bit for bit, on random groups of every length up to two 64-wide
// groups, with every count of ranges, int4 and int8, symmetric and asymmetric, values
// that clamp, values on rounding ties and all-zero groups (scale 0).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "calib/gptq_group_loss.h"
#include "jit/cpu/cpu_info.h"

namespace qforge {
namespace {

TEST(GptqGroupLosses, Avx2GivesTheScalarDefinitionBitForBit) {
  if (!cpu_info().isa.avx2) GTEST_SKIP() << "no AVX2 on this CPU: only the scalar path runs";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1.f, 1.f);
  std::uniform_real_distribution<double> off(-0.3, 0.3), diag(0.2, 2.0);
  std::vector<double> scratch_a, scratch_b;
  int cases = 0;
  for (int count = 1; count <= 130; count += (count < 40 ? 1 : 13))
    for (int bits : {4, 8})
      for (bool asym : {false, true})
        for (int kind = 0; kind < 3; ++kind) {  // 0 random, 1 ties and clamps, 2 zeros
          const int ranges = 1 + (count * 7 + bits + kind) % kClipLanes;
          std::vector<float> values(std::size_t(count), 0.f);
          if (kind != 2)
            for (float& v : values) v = value(rng);
          std::vector<GroupParams> params(static_cast<std::size_t>(ranges));
          for (int r = 0; r < ranges; ++r) {
            const float p = 1.f - 0.03f * float(r);
            params[std::size_t(r)] = group_params_from_range(kind == 2 ? 0.f : -p, p, bits, asym);
          }
          // Kind 1: half-way between levels of range 0 (column 0 surely: no push reaches
          // it; its error's sign then moves the later columns), and far outside its span.
          if (kind == 1)
            for (int i = 0; i < count; ++i)
              values[std::size_t(i)] = i % 3 == 1 ? 5.f * values[std::size_t(i)]
                                                  : (float(i % 7) - 2.5f) * params[0].scale;
          const int ld = count + 3;  // rows of a wider factor
          std::vector<double> u(std::size_t(count) * ld, 0.0);
          for (int i = 0; i < count; ++i) {
            u[std::size_t(i) * ld + i] = diag(rng);
            for (int j = i + 1; j < count; ++j) u[std::size_t(i) * ld + j] = off(rng);
          }
          double a[kClipLanes], b[kClipLanes];
          gptq_group_losses_scalar(values.data(), count, u.data(), ld, params.data(), ranges, bits,
                                   asym, a, scratch_a);
          gptq_group_losses_avx2(values.data(), count, u.data(), ld, params.data(), ranges, bits,
                                 asym, b, scratch_b);
          for (int r = 0; r < ranges; ++r) {
            if (kind != 2) {
              ASSERT_GT(a[r], 0.0) << "count " << count << " range " << r;
            }
            ASSERT_EQ(std::memcmp(&a[r], &b[r], sizeof(double)), 0)
                << "count " << count << " bits " << bits << " asym " << asym << " kind " << kind
                << " range " << r << ": " << a[r] << " vs " << b[r];
          }
          ++cases;
        }
  EXPECT_EQ(cases, 46 * 2 * 2 * 3);
}

}  // namespace
}  // namespace qforge
