// The generated dot-peak loop really runs its sequence: every step adds 60 to lane 0 of
// every accumulator (x = 5, w = 3, four products per int32 lane), so the returned
// sum is 60 * accumulators * iterations. The VNNI loops run under the emulator when the
// CPU lacks them.
#include <gtest/gtest.h>

#include <string>

#include "jit/cpu/cpu_info.h"
#include "jit/emulate/emulator.h"
#include "jit/tune/amx_peak_kernel.h"
#include "jit/tune/dot_peak_kernel.h"
#include "jit/tune/float_peak_kernel.h"
#include "jit/tune/machine_limits.h"

namespace qforge {
namespace {

void expect_sums(DotKind kind) {
  const DotPeakKernel kernel(kind);
  for (std::int64_t iterations : {0, 1, 7, 1000}) {
    EXPECT_EQ(kernel.run(iterations), 60 * kernel.accumulators() * iterations)
        << "kind " << int(kind) << ", " << iterations << " iterations";
  }
}

TEST(DotPeakKernel, Avx2SequenceAddsItsProducts) {
  expect_sums(DotKind::avx2);
}

// Installs the emulator only around this test (without telling the ISA layer), so the
// other tests of this binary still see the CPU as it is.
TEST(DotPeakKernel, VnniLoopsAddTheirProducts) {
  const unsigned missing = (emulate::kAvx512 | emulate::kAvxVnni) & ~emulate::native_features();
  std::string reason;
  if (missing != 0) {
    ASSERT_TRUE(emulate::install(missing, &reason)) << reason;
  }
  expect_sums(DotKind::ymm_vnni);
  expect_sums(DotKind::zmm);
  if (missing != 0) emulate::uninstall();
}

// The AMX loop adds 960 per step to lane 0 of each of its four C tiles (64 products of
// 5 x 3). Natively where the CPU runs AMX (the emulator's probe asks for the process's
// tile permission), else under the emulator.
TEST(AmxPeakKernel, TileProductsAddTheirProducts) {
  const unsigned missing = emulate::kAmx & ~emulate::native_features();
  std::string reason;
  if (missing != 0) {
    ASSERT_TRUE(emulate::install(missing, &reason)) << reason;
  }
  const AmxPeakKernel kernel;
  for (std::int64_t iterations : {0, 1, 3, 50})
    EXPECT_EQ(kernel.run(iterations), 4 * 960 * iterations) << iterations << " iterations";
  if (missing != 0) emulate::uninstall();
}

// A peak only where AMX runs natively; elsewhere 0 and the reason.
TEST(MachineLimits, AmxPeakOnlyWhereAmxIsUsable) {
  std::string why;
  const double gops = amx_peak_gops(1, 20'000, &why);
  if (cpu_info().amx_usable) {
    EXPECT_GT(gops, 0);
  } else {
    EXPECT_EQ(gops, 0);
    EXPECT_NE(why.find("not usable"), std::string::npos) << why;
  }
}

// The floating-point peak loops add 1 (FMA) or 2 (a bf16 pair) per step to lane 0 of
// each of their 12 accumulators; the zmm kinds run under the emulator without AVX-512.
TEST(FloatPeakKernel, LoopsAddTheirProducts) {
  const unsigned missing = emulate::kAvx512 & ~emulate::native_features();
  std::string reason;
  if (missing != 0) {
    ASSERT_TRUE(emulate::install(missing, &reason)) << reason;
  }
  for (FloatPeakKind kind :
       {FloatPeakKind::fma_ymm, FloatPeakKind::fma_zmm, FloatPeakKind::bf16_zmm}) {
    const FloatPeakKernel kernel(kind);
    for (std::int64_t iterations : {0, 1, 7, 1000})
      EXPECT_EQ(kernel.run(iterations),
                std::int64_t{FloatPeakKernel::kAccumulators} * kernel.lane_increment() * iterations)
          << "kind " << int(kind) << ", " << iterations << " iterations";
  }
  if (missing != 0) emulate::uninstall();
}

TEST(AmxPeakKernel, Bf16TileProductsAddTheirProducts) {
  const unsigned missing = emulate::kAmx & ~emulate::native_features();
  std::string reason;
  if (missing != 0) {
    ASSERT_TRUE(emulate::install(missing, &reason)) << reason;
  }
  const AmxPeakKernel kernel(AmxPeakKind::bf16);
  for (std::int64_t iterations : {0, 1, 3, 50})
    EXPECT_EQ(kernel.run(iterations), 4 * 32 * iterations) << iterations << " iterations";
  if (missing != 0) emulate::uninstall();
}

// The bf16 peaks only where their instructions run natively; elsewhere 0 and the reason.
TEST(MachineLimits, FloatPeaks) {
  EXPECT_GT(fma_peak_gflops(1, 100'000), 0);
  EXPECT_NE(fma_peak_instruction().find("vfmadd231ps"), std::string::npos);
  std::string why;
  const CpuInfo& cpu = cpu_info();
  const double bf16 = bf16_peak_gflops(1, 100'000, &why);
  if (cpu.isa.avx512_bf16 && cpu.isa.avx512f && cpu.isa.os_zmm)
    EXPECT_GT(bf16, 0);
  else
    EXPECT_TRUE(bf16 == 0 && !why.empty());
  why.clear();
  const double tiles = amx_bf16_peak_gflops(1, 20'000, &why);
  if (cpu.amx_usable && cpu.isa.amx_bf16)
    EXPECT_GT(tiles, 0);
  else
    EXPECT_TRUE(tiles == 0 && !why.empty());
}

TEST(MachineLimits, PeakAndBandwidthArePositive) {
  EXPECT_GT(dot_peak_gops(1, 100'000), 0);
  EXPECT_GT(read_bandwidth_gbps(1, std::size_t{64} << 20), 0);
  EXPECT_FALSE(dot_peak_instruction().empty());
}

}  // namespace
}  // namespace qforge
