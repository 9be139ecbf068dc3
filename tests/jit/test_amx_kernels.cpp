// The AMX kernels against ops/ref: every M from 1 to 40 and 128 (one and two row tiles,
// the overlapping last block), N tails (a lone panel, masked columns), K tails (the padded
// layout), g in {64, 128, 256, K}, int8/int4, sym/asym and every epilogue; int32 group
// sums bit-exact, floats to 1e-6. On a CPU without AMX they run under the instruction
// emulator (test_jit installs it), which must have executed the tile instructions.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "jit/gemm/amx_generator.h"
#include "jit/gemm/amx_thread_state.h"
#include "jit/gemm/amx_tile_plan.h"
#include "ops/linear/quantized_linear.h"
#include "tests/support/kernel_runner.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

bool amx_emulated() {
  return !(hardware_isa_mask(cpu_info()) & isa_bit(Isa::amx));
}

#define REQUIRE_AMX()                                                                   \
  if (!isa_usable(Isa::amx))                                                            \
  GTEST_SKIP() << "AMX is neither native nor emulated here, or capped (QFORGE_MAX_ISA " \
               << isa_name(max_isa()) << ")"

// Schemes the AMX generator serves: groups that are multiples of 64 (per-channel and
// per-tensor use one group of K rounded up to 64).
// K steps of 64, and of 32 for the groups that are odd multiples of 32 (the GGUF blocks).
const char* const kSchemes[] = {"int8",        "int4-g64-asym", "int8-g128-asym", "int4-g256",
                                "int8-g32",    "int4-asym",     "int8-g256-asym", "int4-g128",
                                "int8-tensor", "int4-g32",      "int8-asym",      "int4-g128-asym",
                                "int8-g64",    "int4-g32-asym", "int8-g96-asym",  "int4-g160"};

void expect_kernel_matches(const test::KernelCase& c) {
  EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
}

TEST(AmxKernels, EveryRowCountUpTo40And128) {
  REQUIRE_AMX();
  std::vector<std::int64_t> rows;
  for (std::int64_t m = 1; m <= 40; ++m) rows.push_back(m);
  rows.push_back(128);
  const std::int64_t columns[] = {40, 17, 16, 1, 33, 64, 15};
  int i = 0;
  for (const std::int64_t m : rows)
    for (int variant = 0; variant < 3; ++variant) {
      test::KernelCase c;
      c.isa = Isa::amx;
      c.m = m;
      c.n = columns[i % std::size(columns)];
      c.scheme = parse_quant_scheme(kSchemes[i % std::size(kSchemes)]);
      c.k = c.scheme.group > 0 ? 3 * c.scheme.group - 20 : 200 + 4 * (i % 5);  // K tails
      c.epilogue = test::epilogue_number(i);
      c.seed = 7 * m + variant;
      c.unit_splits = 1 + i % 2;
      expect_kernel_matches(c);
      ++i;
      if (HasFailure()) return;
    }
}

TEST(AmxKernels, EveryGroupSchemeAndEpilogue) {
  REQUIRE_AMX();
  int i = 0;
  for (const char* scheme : kSchemes)
    for (int e = 0; e < 8; ++e) {
      test::KernelCase c;
      c.isa = Isa::amx;
      c.m = i % 2 ? 21 : 7;   // two row tiles, one
      c.n = i % 3 ? 40 : 17;  // a lone last panel, a masked tail
      c.scheme = parse_quant_scheme(scheme);
      c.k = c.scheme.group > 0 ? 2 * c.scheme.group + 4 * (1 + i % 3) : 252;  // K tails
      c.epilogue = test::epilogue_number(e);
      c.seed = 100 + i;
      expect_kernel_matches(c);
      ++i;
      if (HasFailure()) return;
    }
}

// Every scheme x M x epilogue 0, 3, 6 on tiles; case i has N 17 or 40, one or two unit
// splits, seed seed0 + i, and fill(case, i) sets the rest.
template <typename Fill>
void sweep_tiles(std::initializer_list<const char*> schemes, std::initializer_list<std::int64_t> ms,
                 int seed0, Fill fill) {
  int i = 0;
  for (const char* scheme : schemes)
    for (const std::int64_t m : ms)
      for (int e = 0; e < 8; e += 3) {
        test::KernelCase c;
        c.isa = Isa::amx;
        c.m = m;
        c.n = i % 3 ? 40 : 17;
        c.scheme = parse_quant_scheme(scheme);
        c.epilogue = test::epilogue_number(e + i);
        c.seed = seed0 + i;
        c.unit_splits = 1 + i % 2;
        fill(c, i);
        expect_kernel_matches(c);
        ++i;
        if (testing::Test::HasFailure()) return;
      }
}

// Two-level scales (GGUF's Q4_K: int4 g32 with s8 sub-scales and sub-offsets times the
// f16 values of a super-block header): one K step a group, the header pointer kept in the
// frame and reloaded for each group's dequantization.
TEST(AmxKernels, TwoLevelScales) {
  REQUIRE_AMX();
  sweep_tiles({"int4-g32-sb256-asym", "int4-g64-sb256", "int4-g32-sb64-asym", "int4-g32-sb32"},
              {1, 7, 16, 21, 33, 40}, 300, [](test::KernelCase& c, int i) {
                c.k = i % 2 ? 2 * c.scheme.superblock - 24 : c.scheme.superblock;
              });
}

// int5 (GGUF's Q5 types): each 32-k chunk's nibbles plus its fifth bits unpacked into the B
// tiles; steps of 32 (g32, g96) and 64 (g64, per-channel), one- and two-level scales.
TEST(AmxKernels, Int5Weights) {
  REQUIRE_AMX();
  sweep_tiles({"int5-g32", "int5-g32-asym", "int5-g32-sb256-asym", "int5-g64", "int5-g96-asym",
               "int5-asym"},
              {1, 16, 21, 40}, 900, [](test::KernelCase& c, int i) {
                c.k = i % 2 ? 512 - 24 : 288;
                c.float_offsets = c.scheme.asymmetric && !c.scheme.two_level() && i % 4 == 1;
              });
}

// Q4_1-style float minima in place of integer zero points, in every epilogue.
TEST(AmxKernels, FloatOffsets) {
  REQUIRE_AMX();
  for (int e = 0; e < 8; ++e) {
    test::KernelCase c;
    c.isa = Isa::amx;
    c.m = e % 2 ? 21 : 7;
    c.n = e % 3 ? 40 : 17;
    c.scheme = parse_quant_scheme(e % 4 < 2 ? "int4-g64-asym" : "int4-asym");
    c.k = e % 4 < 2 ? 3 * 64 + 4 * (e % 3) : 252;
    c.epilogue = test::epilogue_number(e);
    c.seed = 300 + e;
    c.float_offsets = true;
    expect_kernel_matches(c);
    if (HasFailure()) return;
  }
}

// Group sizes beside the sweep's: exactly K, one group of 64, many groups.
TEST(AmxKernels, GroupEdges) {
  REQUIRE_AMX();
  struct Case {
    const char* scheme;
    std::int64_t k;
  };
  for (const Case shape :
       {Case{"int8-g256", 256}, Case{"int4-g64-asym", 64}, Case{"int8-g64-asym", 1024},
        Case{"int4-g128", 128 * 5}, Case{"int8", 64}, Case{"int4", 1}})
    for (const std::int64_t m : {16, 32, 33}) {
      test::KernelCase c;
      c.isa = Isa::amx;
      c.m = m;
      c.n = 48;
      c.k = shape.k;
      c.scheme = parse_quant_scheme(shape.scheme);
      c.seed = m + shape.k;
      expect_kernel_matches(c);
      c.epilogue = Epilogue{false, false, false, OutputKind::group_sums};
      expect_kernel_matches(c);
      if (HasFailure()) return;
    }
}

// Threads call one kernel on disjoint unit ranges, each range with its own N tail.
TEST(AmxKernels, UnitRangesAsThreadsSplitThem) {
  REQUIRE_AMX();
  for (const int splits : {2, 3, 5})
    for (const bool pair : {false, true}) {
      test::KernelCase c;
      c.isa = Isa::amx;
      c.m = 19;
      c.n = 16 * 5 + 9;
      c.k = 192;
      c.scheme = parse_quant_scheme(splits % 2 ? "int4-g64" : "int8-g64-asym");
      c.epilogue = pair ? Epilogue{false, true, false, OutputKind::f32} : Epilogue{};
      c.unit_splits = splits;
      c.seed = splits;
      expect_kernel_matches(c);
    }
}

TEST(AmxKernels, GroupsNotMultipleOf32AreUnsupported) {
  for (const char* scheme : {"int4-g40", "int8-g36-asym", "int8-g100", "int4-g16"}) {
    const PackedHeader h = make_packed_header(64, 320, parse_quant_scheme(scheme));
    const GemmKey key = gemm_key_for(h, Epilogue{}, Isa::amx, 32);
    EXPECT_THROW(AmxGenerator{key}, Error) << scheme;
  }
}

TEST(AmxKernels, OtherBlockingsAndIsasAreRefused) {
  const PackedHeader h = make_packed_header(64, 256, parse_quant_scheme("int8"));
  GemmKey key = gemm_key_for(h, Epilogue{}, Isa::amx, 32);
  EXPECT_EQ(key.blocking, amx_blocking(key));
  key.blocking.mr = 8;
  EXPECT_THROW(AmxGenerator{key}, Error);
  EXPECT_THROW(AmxGenerator{gemm_key_for(h, Epilogue{}, Isa::avx512_vnni, 32)}, Error);
  EXPECT_THROW(GemmGenerator{gemm_key_for(h, Epilogue{}, Isa::amx, 32)}, Error);
}

TEST(AmxTilePlan, BlocksCoverMWithOneConfiguration) {
  for (std::int64_t m = 1; m <= 300; ++m) {
    const int rows = amx_block_rows(m);
    const std::int64_t blocks = (m + kAmxBlockRows - 1) / kAmxBlockRows;
    ASSERT_GE(rows, 1);
    ASSERT_LE(rows, kAmxBlockRows);
    ASSERT_GE(rows * blocks, m) << m;        // the blocks cover M
    ASSERT_LT((rows - 1) * blocks, m) << m;  // overlap below one row per block
    if (m > kAmxBlockRows) {
      ASSERT_GT(rows, kAmxTileRows) << m;  // several blocks: two row tiles each
    }
  }
  const AmxTileConfig five = amx_tile_config(5), twenty = amx_tile_config(20);
  EXPECT_EQ(five[0], 1);
  EXPECT_EQ(five[48 + amx_c_tile(0, 1)], 5);
  EXPECT_EQ(five[48 + amx_a_tile(1)], 0);  // row tile 1 unused
  EXPECT_EQ(five[48 + amx_b_tile(1)], 16);
  EXPECT_EQ(twenty[48 + amx_a_tile(0)], 16);
  EXPECT_EQ(twenty[48 + amx_c_tile(1, 1)], 4);
  EXPECT_EQ(twenty[16 + 2 * amx_c_tile(1, 1)], 64);
  EXPECT_THROW(amx_tile_config(33), Error);
  // K steps of 32 (g32, g96): A rows of 32 bytes, B tiles of 8 quad rows, C unchanged.
  const AmxTileConfig half = amx_tile_config(20, 32);
  EXPECT_EQ(half[16 + 2 * amx_a_tile(0)], 32);
  EXPECT_EQ(half[48 + amx_a_tile(1)], 4);
  EXPECT_EQ(half[48 + amx_b_tile(0)], 8);
  EXPECT_EQ(half[16 + 2 * amx_b_tile(1)], 64);
  EXPECT_EQ(half[16 + 2 * amx_c_tile(1, 0)], 64);
  EXPECT_EQ(amx_step_k(32), 32);
  EXPECT_EQ(amx_step_k(96), 32);
  EXPECT_EQ(amx_step_k(128), 64);
  EXPECT_EQ(amx_step_k(40), 0);
  EXPECT_THROW(amx_tile_config(8, 16), Error);
}

// Runs one kernel call and returns how many instructions the emulator executed for it.
std::uint64_t emulated_instructions_of_call(const test::KernelCase& c) {
  const std::uint64_t before = emulate::emulated_instruction_count();
  EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
  return emulate::emulated_instruction_count() - before;
}

// ldtilecfg runs when the thread's live configuration differs from the call's, and only
// then: the same call right after costs exactly one instruction less.
TEST(AmxKernels, TileConfigurationIsLoadedOnlyWhenItChanges) {
  REQUIRE_AMX();
  if (!amx_emulated()) GTEST_SKIP() << "counts instructions through the emulator";
  test::KernelCase c;
  c.isa = Isa::amx;
  c.m = 20;
  c.n = 32;
  c.k = 128;
  c.scheme = parse_quant_scheme("int8-g64");
  test::KernelCase other = c;
  other.m = 5;  // another block height, another configuration
  emulated_instructions_of_call(other);
  const std::uint64_t first = emulated_instructions_of_call(c);
  const std::uint64_t again = emulated_instructions_of_call(c);
  EXPECT_EQ(first, again + 1);
  // After a tilerelease the configuration is loaded again.
  note_amx_tiles_in_use();
  release_amx_tiles();
  EXPECT_EQ(emulated_instructions_of_call(c), again + 1);
}

// The results above came from tile instructions: without AMX hardware only the emulator
// can have run them, at least as many as the tile plan issues.
TEST(AmxKernels, EmulatorExecutedTheTileInstructions) {
  REQUIRE_AMX();
  if (!amx_emulated()) GTEST_SKIP() << "AMX runs natively here";
  test::KernelCase c;
  c.isa = Isa::amx;
  c.m = 40;  // two blocks of 20 rows: 2 row tiles each
  c.n = 64;  // two blocks of 2 panels
  c.k = 512;
  c.scheme = parse_quant_scheme("int8-g128");
  c.epilogue = Epilogue{false, false, false, OutputKind::group_sums};
  // per block and group: 4 tilezero + 2 steps x (2 B + 2 A loads + 4 tdpbusd) + 4 tilestored
  const std::uint64_t tile_instructions = 2 * 2 * 4 * (4 + 2 * 8 + 4);
  EXPECT_GE(emulated_instructions_of_call(c), tile_instructions);
}

}  // namespace
}  // namespace qforge
