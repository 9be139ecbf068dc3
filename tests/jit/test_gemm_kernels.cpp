// Generated kernels against ops/ref on every ISA path this process can run (natively,
// or through the opt-in instruction emulator), over random shapes and every tail class.
// Run under QFORGE_MAX_ISA=avx-vnni / avx2 to pin a path.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"
#include "tests/support/kernel_runner.h"

namespace qforge {
namespace {

std::vector<Isa> kernel_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512_vnni})
    if (isa_usable(isa)) out.push_back(isa);
  return out;
}

// Native paths get the big sweep; emulated ones (thousands of traps per call) a smaller one.
int sweep_size(Isa isa, int native) {
  const bool emulated = !(hardware_isa_mask(cpu_info()) & isa_bit(isa));
  return emulated ? native / 8 : native;
}

const char* const kSchemes[] = {"int8",      "int8-asym",      "int4-g32",   "int4-g32-asym",
                                "int8-g64",  "int8-g128-asym", "int4-g128",  "int4-asym",
                                "int4-g256", "int8-g36",       "int8-tensor"};

void expect_kernel_matches(const test::KernelCase& c) {
  const std::string error = test::check_kernel(c);
  EXPECT_EQ(error, "") << test::describe(c);
}

// The ymm SwiGLU GEMM makes one pass per 8-column half of its panel pairs
// (register_budget.h), so it holds more rows than the 1-row tile a whole pair allows:
// every tail of N (none, inside the first half, inside the second), every M tail, int8
// and int4, f32 and u8 output.
TEST(GemmKernels, SwigluColumnPassesMatchTheReference) {
  for (Isa isa : kernel_isas()) {
    if (vector_isa_of(isa).vectors_per_panel() == 1) continue;  // zmm: one pass
    for (const char* scheme : {"int8", "int4-g32-asym", "int8-g64"})
      for (std::int64_t n : {16, 21, 29, 40})
        for (std::int64_t m : {2, 4, 5, 7, 11, 33}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = n;
          c.k = 128;
          c.scheme = parse_quant_scheme(scheme);
          c.epilogue = test::epilogue_number(m % 2 ? 3 : 7);  // SwiGLU, SwiGLU + u8
          c.seed = 977 + m * 7 + n;
          const GemmKey key = test::key_for(c, make_packed_header(n, c.k, c.scheme, true));
          if (key.bucket != MBucket::one) {
            EXPECT_EQ(slice_vectors(key), 1) << kernel_name(key);
            EXPECT_GE(default_blocking(key).mr * default_blocking(key).nr, 2) << kernel_name(key);
          }
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
  }
}

TEST(GemmKernels, EveryTailClassAndEpilogue) {
  const auto isas = kernel_isas();
  ASSERT_FALSE(isas.empty()) << "no kernel ISA usable on this CPU";
  for (Isa isa : isas) {
    int index = 0;
    for (const char* scheme : kSchemes)
      for (std::int64_t m : {1, 2, 3, 4, 5, 9}) {
        if (index++ % (sweep_size(isa, 8) > 1 ? 1 : 4) != 0) continue;
        for (std::int64_t n : {1, 15, 16, 17, 40}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = n;
          c.k = (n * 37 + m * 12) % 300 / 4 * 4 + 4;
          c.scheme = parse_quant_scheme(scheme);
          c.epilogue = test::epilogue_number(int(m + n));
          c.seed = m * 131 + n;
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
      }
  }
}

// Every scheme x M {1, 2, 3, 5, 9} x N {1, 17, 40} on every ISA (emulated ones a third of
// the M values), each case completed by fill(case, scheme index).
template <typename Fill>
void sweep_schemes(std::initializer_list<const char*> schemes, Fill fill) {
  for (Isa isa : kernel_isas()) {
    int i = 0, s = 0;
    for (const char* scheme : schemes) {
      for (std::int64_t m : {1, 2, 3, 5, 9}) {
        if (i++ % (sweep_size(isa, 8) > 1 ? 1 : 3) != 0) continue;
        for (std::int64_t n : {1, 17, 40}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = n;
          c.scheme = parse_quant_scheme(scheme);
          fill(c, s);
          expect_kernel_matches(c);
          if (testing::Test::HasFailure()) return;
        }
      }
      ++s;
    }
  }
}

// Two-level scales (GGUF's K-quant super-blocks: packed_layout.h): a super-block header
// every S groups, s8 sub-scales (and sub-offsets) times its f16 values; S of 1, 2, 8 and
// 16 groups, K tails that leave whole padded super-blocks, every M and N tail class and
// epilogue, f32 and weight-only activations.
TEST(GemmKernels, TwoLevelScales) {
  sweep_schemes(
      {"int4-g32-sb256-asym", "int8-g16-sb256", "int4-g16-sb256", "int4-g16-sb256-asym",
       "int4-g32-sb64-asym", "int8-g16-sb16", "woq-int4-g32-sb256-asym", "woq-int8-g16-sb256"},
      [](test::KernelCase& c, int) {
        const std::int64_t m = c.m, n = c.n;
        c.k = (m + n) % 3 == 0 ? 512 : 2 * c.scheme.superblock + 8 * (1 + (m + n) % 5);
        c.epilogue = test::epilogue_number(int(m + 2 * n));
        if (c.scheme.weight_only && c.epilogue.output == OutputKind::group_sums)
          c.epilogue = test::epilogue_number(0);
        c.seed = m * 17 + n;
      });
}

// int5 (GGUF's Q5_0, Q5_1 and Q5_K): the nibble rows plus a fifth-bit row per 32 k, one-
// and two-level scales, integer zero points and (Q5_1's) float minima, per-channel and
// groups of 32 (one AMX step of 32), 64 and 96, every M and N tail class and epilogue.
TEST(GemmKernels, Int5Weights) {
  sweep_schemes({"int5-g32", "int5-g32-asym", "int5-g32-sb256-asym", "int5-g64", "int5-asym",
                 "int5-g96-asym", "int5-g32-sb64", "int5-g32-asym"},
                [](test::KernelCase& c, int s) {
                  const std::int64_t m = c.m, n = c.n;
                  c.k = (m + n) % 3 == 0 ? 512 : 256 + 8 * (1 + (m + n) % 5);
                  c.epilogue = test::epilogue_number(int(m + 3 * n));
                  c.float_offsets = s == 7;  // the second int5-g32-asym: Q5_1 minima
                  c.seed = 700 + m * 17 + n;
                });
}

// GGUF Q4_1 blocks keep their float minimum: int4 asymmetric weights with float offsets
// (not scale times an integer zero point), over M, N and K tails, groups and epilogues.
TEST(GemmKernels, FloatOffsets) {
  for (Isa isa : kernel_isas()) {
    int index = 0;
    for (const char* scheme : {"int4-g32-asym", "int4-g128-asym", "int4-asym"})
      for (std::int64_t m : {1, 3, 4, 5, 9, 33})
        for (std::int64_t n : {7, 16, 40}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = n;
          c.k = 4 * (16 + (index * 37) % 80);
          c.scheme = parse_quant_scheme(scheme);
          c.epilogue = test::epilogue_number(index);
          c.seed = 5000 + index++;
          c.float_offsets = true;
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
  }
}

TEST(GemmKernels, RandomShapes) {
  for (Isa isa : kernel_isas()) {
    std::mt19937 rng(static_cast<unsigned>(isa) * 7 + 1);
    const int cases = sweep_size(isa, 600);
    for (int i = 0; i < cases; ++i) {
      test::KernelCase c;
      c.isa = isa;
      c.n = std::uniform_int_distribution<int>(1, 300)(rng);
      c.k = std::uniform_int_distribution<int>(1, 256)(rng) * 4;
      const int m_choices[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 33};
      c.m = m_choices[std::uniform_int_distribution<int>(0, 10)(rng)];
      c.scheme = parse_quant_scheme(kSchemes[i % std::size(kSchemes)]);
      c.epilogue = test::epilogue_number(i / 3);
      c.seed = 1000 + i;
      c.unit_splits = 1 + i % 3;
      expect_kernel_matches(c);
      if (HasFailure()) return;
    }
  }
}

TEST(GemmKernels, LlamaShapesAndLargeM) {
  struct Shape {
    std::int64_t n, k;
  };
  for (Isa isa : kernel_isas()) {
    const bool emulated = !(hardware_isa_mask(cpu_info()) & isa_bit(isa));
    for (const Shape s : {Shape{64, 4096}, Shape{48, 11008}, Shape{2048, 64}})
      for (std::int64_t m : {1, 4, 33, 128}) {
        if (emulated && m > 4) continue;
        for (const char* scheme : {"int8", "int4-g128", "int8-g128-asym", "int4-g32-asym"}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = s.n;
          c.k = s.k;
          c.scheme = parse_quant_scheme(scheme);
          c.seed = s.n + s.k + m;
          c.unit_splits = 2;
          expect_kernel_matches(c);
          c.epilogue = Epilogue{false, false, false, OutputKind::group_sums};
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
      }
  }
}

TEST(GemmKernels, EveryBlockingThatFits) {
  for (Isa isa : kernel_isas()) {
    int checked = 0;
    const bool emulated = !(hardware_isa_mask(cpu_info()) & isa_bit(isa));
    for (const char* scheme : {"int8", "int4-g64-asym", "int8-g32"})
      for (int mr = 1; mr <= 8; ++mr)
        for (int nr = 1; nr <= 8; ++nr) {
          if (emulated && (mr + nr) % 3 != 0) continue;
          test::KernelCase c;
          c.isa = isa;
          c.m = mr + 2;
          c.n = 16 * nr + 5;
          c.k = 200;
          c.scheme = parse_quant_scheme(scheme);
          c.default_blocking = false;
          c.blocking = Blocking{mr, nr, 1 + (mr + nr) % 5, (mr % 2) * 512};
          c.epilogue = test::epilogue_number(mr * nr);
          const PackedHeader h = make_packed_header(c.n, c.k, c.scheme, c.epilogue.swiglu);
          const GemmKey key = test::key_for(c, h);
          if (!fits(key, c.blocking)) {
            EXPECT_THROW(GemmGenerator{key}, Error) << test::describe(c);
            continue;
          }
          expect_kernel_matches(c);
          ++checked;
          if (HasFailure()) return;
        }
    EXPECT_GE(checked, 4) << isa_name(isa);
  }
}

// A zmm tile of one accumulator (1 x 1, one panel) with sub-byte weights puts its
// high-nibble dot products on a second accumulator (gemm_generator.h, split_chain_), added
// back before each group correction: exact, so the kernels match the reference bit for bit
// with every K unroll, group size, tail and epilogue, emulated where zmm is not native.
TEST(GemmKernels, OneChainSubByteTilesSplitTheirDotProducts) {
  const auto isas = kernel_isas();
  if (std::find(isas.begin(), isas.end(), Isa::avx512_vnni) == isas.end())
    GTEST_SKIP() << "avx512-vnni runs neither natively nor through the emulator here";
  int checked = 0;
  for (const char* scheme : {"int4-g128", "int4-g32-asym", "int5-g32", "int4-asym"})
    for (std::int64_t m : {1, 3})
      for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{40, 200}, {16, 256}}) {
        test::KernelCase c;
        c.isa = Isa::avx512_vnni;
        c.m = m;
        c.n = n;
        c.k = k;
        c.scheme = parse_quant_scheme(scheme);
        c.default_blocking = false;
        c.blocking = Blocking{1, 1, 1 + checked % 4, (checked % 2) * 256};
        const int one_panel_epilogues[] = {0, 1, 2, 4, 6};  // no SwiGLU pair: one panel
        c.epilogue = test::epilogue_number(one_panel_epilogues[checked % 5]);
        c.seed = 4111 + checked;
        expect_kernel_matches(c);
        c.epilogue = Epilogue{false, false, false, OutputKind::group_sums};
        expect_kernel_matches(c);
        ++checked;
        if (HasFailure()) return;
      }
  EXPECT_EQ(checked, 16);
}

// A one-unit SwiGLU decode tile reads its gate panel, then its up panel, each with the
// whole K loop (gemm_generator.h, panel_sequential_), every accumulator kept through both
// passes: M of the decode buckets, N tail, group layout (one group, several, two-level
// scales), K unroll and prefetch distance, f32 and u8 output, on every ISA path, against the
// reference. The generator must say it took the sequential passes.
TEST(GemmKernels, OneUnitSwigluDecodeTilesReadTheirPanelsInTurn) {
  int checked = 0;
  for (Isa isa : kernel_isas()) {
    const bool emulated = !(hardware_isa_mask(cpu_info()) & isa_bit(isa));
    for (const char* scheme : {"int8", "int4-g128", "int4-g32-asym", "int5-g32", "int8-g64"})
      for (std::int64_t m : {1, 2, 4})
        for (std::int64_t n : {16, 21, 40}) {
          const int i = checked++;
          if (emulated && i % 4 != 0) continue;
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = n;
          c.k = 256;
          c.scheme = parse_quant_scheme(scheme);
          c.default_blocking = false;
          c.blocking = Blocking{static_cast<int>(m), 1, 1 + i % 4, (i % 3 == 2) * 256};
          c.epilogue = test::epilogue_number(i % 2 ? 3 : 7);  // SwiGLU, SwiGLU + u8
          c.seed = 6101 + i;
          c.unit_splits = 1 + i % 2;
          const GemmKey key = test::key_for(c, make_packed_header(n, c.k, c.scheme, true));
          if (!fits(key, c.blocking)) continue;
          // The ymm SwiGLU tiles of more than one row take their columns in slices instead
          // (register_budget.h), each slice with both panels.
          const bool sliced =
              vector_isa_of(isa).vectors_per_panel() > 1 && key.bucket != MBucket::one;
          EXPECT_EQ(GemmGenerator{key}.panel_sequential(), !sliced) << test::describe(c);
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
  }
  // Two-level scales (Q4_K's form: int4 g32 asymmetric, super-blocks of 8 groups).
  for (Isa isa : kernel_isas()) {
    test::KernelCase c;
    c.isa = isa;
    c.m = 1;
    c.n = 40;
    c.k = 512;
    c.scheme = parse_quant_scheme("int4-g32-sb256-asym");
    c.default_blocking = false;
    c.blocking = Blocking{1, 1, 2, 0};
    c.epilogue = test::epilogue_number(3);
    c.seed = 6199;
    const GemmKey key = test::key_for(c, make_packed_header(c.n, c.k, c.scheme, true));
    ASSERT_EQ(key.superblock_groups, 8);
    EXPECT_TRUE(GemmGenerator{key}.panel_sequential());
    expect_kernel_matches(c);
  }
  // Prefill tiles and tiles of several units keep their panels side by side.
  int side_by_side = 0;
  for (Isa isa : kernel_isas())
    for (const auto& [m, blocking] :
         {std::pair{std::int64_t{1}, Blocking{1, 2, 1, 0}}, {128, Blocking{4, 1, 1, 0}}}) {
      test::KernelCase c;
      c.isa = isa;
      c.m = m;
      c.n = 40;
      c.k = 256;
      c.scheme = parse_quant_scheme("int8");
      c.epilogue = test::epilogue_number(3);
      c.default_blocking = false;
      c.blocking = blocking;
      const GemmKey key = test::key_for(c, make_packed_header(c.n, c.k, c.scheme, true));
      if (!fits(key, blocking)) continue;
      EXPECT_FALSE(GemmGenerator{key}.panel_sequential()) << test::describe(c);
      ++side_by_side;
    }
  EXPECT_GE(side_by_side, 1);
}

// The emulated paths really ran through the emulator (not silently skipped).
TEST(GemmKernels, EmulatedPathsWereExecuted) {
  const std::uint64_t before = emulate::emulated_instruction_count();
  bool any_emulated = false;
  for (Isa isa : kernel_isas()) {
    if (hardware_isa_mask(cpu_info()) & isa_bit(isa)) continue;
    any_emulated = true;
    test::KernelCase c;
    c.isa = isa;
    c.m = 2;
    c.n = 40;
    c.k = 128;
    c.scheme = parse_quant_scheme("int4-g32-asym");
    expect_kernel_matches(c);
  }
  if (any_emulated) {
    EXPECT_GT(emulate::emulated_instruction_count(), before);
  }
}

}  // namespace
}  // namespace qforge
