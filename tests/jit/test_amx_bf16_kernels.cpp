// The AMX-BF16 weight-only kernels (int4 nibbles looked up as bf16 pairs into B tiles,
// tdpbf16ps against the bf16 rows of x) against ops/ref over the same bf16-rounded
// activations: one and two row tiles, the overlapping last block, N tails, K tails, every
// group size the tiles take (multiples of 32: one step of 32 k or several a group),
// symmetric and asymmetric, every float epilogue and unit splits. On a CPU without AMX
// they run under the instruction emulator (test_jit installs it).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "jit/gemm/amx_generator.h"
#include "jit/gemm/amx_tile_plan.h"
#include "ops/linear/quantized_linear.h"
#include "tests/support/kernel_runner.h"

namespace qforge {
namespace {

#define REQUIRE_AMX_BF16()                                                                    \
  if (!amx_bf16_runs() || !bf16_weight_only_runs())                                           \
  GTEST_SKIP() << "AMX-BF16 with AVX512-BF16 is neither native nor emulated here, or capped " \
                  "(QFORGE_MAX_ISA "                                                          \
               << isa_name(max_isa()) << ")"

const char* const kSchemes[] = {"woq-int4-g32",  "woq-int4-g128-asym", "woq-int4-g64",
                                "woq-int4-asym", "woq-int4-g96-asym",  "woq-int4-g256",
                                "woq-int4",      "woq-int4-g32-asym"};

// Epilogue number i of the kernel runner, skipping the integer group sums (5).
Epilogue float_epilogue(int i) {
  const Epilogue e = test::epilogue_number(i);
  return e.output == OutputKind::group_sums ? Epilogue{} : e;
}

test::KernelCase tile_case(std::int64_t m, std::int64_t n, const char* scheme, int i) {
  test::KernelCase c;
  c.isa = Isa::amx;
  c.bf16 = true;
  c.m = m;
  c.n = n;
  c.scheme = parse_quant_scheme(scheme);
  // K tails: a few groups less 4..20 columns, or (per-channel) any multiple of 8.
  c.k = c.scheme.group > 0 ? (2 + i % 2) * c.scheme.group - 4 * (1 + i % 5) : 200 + 8 * (i % 7);
  c.epilogue = float_epilogue(i);
  c.seed = 1000 + 17 * i;
  c.unit_splits = 1 + i % 2;
  return c;
}

TEST(AmxBf16Kernels, EverySchemeRowBlockAndEpilogue) {
  REQUIRE_AMX_BF16();
  const std::int64_t rows[] = {1, 7, 16, 17, 21, 32, 33, 40, 70};
  const std::int64_t columns[] = {40, 17, 16, 1, 33, 64};
  int i = 0;
  for (const char* scheme : kSchemes)
    for (const std::int64_t m : rows) {
      const test::KernelCase c = tile_case(m, columns[i % std::size(columns)], scheme, i);
      EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
      ++i;
      if (HasFailure()) return;
    }
}

TEST(AmxBf16Kernels, EveryFloatEpilogueOnTwoRowTiles) {
  REQUIRE_AMX_BF16();
  for (int e = 0; e < 8; ++e) {
    test::KernelCase c = tile_case(e % 2 ? 29 : 128, e % 3 ? 48 : 17, kSchemes[e], e);
    c.epilogue = float_epilogue(e);
    EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
    if (HasFailure()) return;
  }
}

// The results above came from tile instructions: without AMX hardware only the emulator
// can have run them, at least as many as the tile plan issues.
TEST(AmxBf16Kernels, EmulatorExecutedTheTileInstructions) {
  REQUIRE_AMX_BF16();
  if (hardware_isa_mask(cpu_info()) & isa_bit(Isa::amx)) GTEST_SKIP() << "AMX runs natively here";
  test::KernelCase c = tile_case(40, 64, "woq-int4-g128", 0);
  c.k = 512;
  c.epilogue = Epilogue{};
  c.unit_splits = 1;
  const std::uint64_t before = emulate::emulated_instruction_count();
  EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
  // two blocks of 20 rows (2 row tiles) x two blocks of 2 panels, per group: 4 tilezero,
  // 4 steps x (2 B + 2 A loads + 4 tdpbf16ps), 4 tilestored
  const std::uint64_t tile_instructions = 2 * 2 * 4 * (4 + 4 * 8 + 4);
  EXPECT_GE(emulate::emulated_instruction_count() - before, tile_instructions);
}

// bf16 keys step 32 k with the full-tile configuration; the tiles take bf16 activations
// and int4 weights only, in groups that are multiples of 32.
TEST(AmxBf16Kernels, StepsAndRefusals) {
  const PackedHeader g128 = make_packed_header(64, 256, parse_quant_scheme("int4-g128"));
  const GemmKey key = gemm_key_for(g128, Epilogue{}, Isa::amx, 32, ActivationKind::bf16);
  EXPECT_EQ(amx_step_k(key), kAmxBf16StepK);
  EXPECT_EQ(amx_step_bytes(key), kAmxTileK);
  EXPECT_EQ(amx_step_k(gemm_key_for(g128, Epilogue{}, Isa::amx, 32)), kAmxTileK);
  EXPECT_NE(kernel_name(key).find("gemm_u8bf16_amx"), std::string::npos) << kernel_name(key);
  EXPECT_THROW(AmxGenerator{gemm_key_for(g128, Epilogue{}, Isa::amx, 32, ActivationKind::f32)},
               Error);
  const PackedHeader int8 = make_packed_header(64, 256, parse_quant_scheme("int8-g128"));
  EXPECT_THROW(AmxGenerator{gemm_key_for(int8, Epilogue{}, Isa::amx, 32, ActivationKind::bf16)},
               Error);
  const PackedHeader g40 = make_packed_header(64, 320, parse_quant_scheme("int4-g40"));
  const GemmKey odd = gemm_key_for(g40, Epilogue{}, Isa::amx, 32, ActivationKind::bf16);
  EXPECT_EQ(amx_step_k(odd), 0);
  EXPECT_THROW(AmxGenerator{odd}, Error);
}

}  // namespace
}  // namespace qforge
