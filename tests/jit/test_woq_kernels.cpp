// Weight-only kernels (f32 activations, FMA over the packed weights dequantized in
// registers) against the double-precision reference on every ISA path this process can
// run (natively or through the emulator), over every tail class, epilogue, group layout
// and blocking; and the whole layer against the dequantized weights' f64 matmul.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/cpu/isa.h"
#include "jit/gemm/amx_generator.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/quantize.h"
#include "tests/support/kernel_runner.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

std::vector<Isa> kernel_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512_vnni})
    if (isa_usable(isa)) out.push_back(isa);
  return out;
}

bool emulated(Isa isa) {
  return !(hardware_isa_mask(cpu_info()) & isa_bit(isa));
}

const char* const kSchemes[] = {"woq-int8",          "woq-int8-asym",  "woq-int4-g32",
                                "woq-int4-g32-asym", "woq-int8-g64",   "woq-int8-g128-asym",
                                "woq-int4-g128",     "woq-int4-asym",  "woq-int4-g256",
                                "woq-int8-g36",      "woq-int8-tensor"};

// Epilogue number i of the kernel runner, skipping the integer group sums (5).
Epilogue float_epilogue(int i) {
  const Epilogue e = test::epilogue_number(i);
  return e.output == OutputKind::group_sums ? Epilogue{} : e;
}

void expect_kernel_matches(const test::KernelCase& c) {
  EXPECT_EQ(test::check_kernel(c), "") << test::describe(c);
}

// M x N with a K (a multiple of k_step) and an epilogue that vary with both.
test::KernelCase tail_case(Isa isa, std::int64_t m, std::int64_t n, const char* scheme,
                           int k_step) {
  test::KernelCase c;
  c.isa = isa;
  c.m = m;
  c.n = n;
  c.k = (n * 37 + m * 12) % 300 / k_step * k_step + k_step;
  c.scheme = parse_quant_scheme(scheme);
  c.epilogue = float_epilogue(int(m + n));
  c.seed = m * 131 + n;
  return c;
}

TEST(WeightOnlyKernels, EveryTailClassAndEpilogue) {
  const auto isas = kernel_isas();
  ASSERT_FALSE(isas.empty());
  for (Isa isa : isas) {
    int index = 0;
    for (const char* scheme : kSchemes)
      for (std::int64_t m : {1, 2, 3, 4, 5, 9}) {
        if (emulated(isa) && index++ % 3 != 0) continue;
        for (std::int64_t n : {1, 15, 16, 17, 40}) {
          expect_kernel_matches(tail_case(isa, m, n, scheme, 4));
          if (HasFailure()) return;
        }
      }
  }
}

// Case i of a random sweep: N in 1..300, K a multiple of k_step up to 1024, M around the
// bucket edges, epilogue i / 3, 1..3 unit ranges.
test::KernelCase random_case(Isa isa, std::mt19937& rng, int i, const char* scheme, int k_step) {
  test::KernelCase c;
  c.isa = isa;
  c.n = std::uniform_int_distribution<int>(1, 300)(rng);
  c.k = std::uniform_int_distribution<int>(1, 1024 / k_step)(rng) * k_step;
  const int m_choices[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 33};
  c.m = m_choices[std::uniform_int_distribution<int>(0, 10)(rng)];
  c.scheme = parse_quant_scheme(scheme);
  c.epilogue = float_epilogue(i / 3);
  c.seed = 7000 + i;
  c.unit_splits = 1 + i % 3;
  return c;
}

TEST(WeightOnlyKernels, RandomShapesAndSplits) {
  for (Isa isa : kernel_isas()) {
    std::mt19937 rng(static_cast<unsigned>(isa) * 11 + 3);
    const int cases = emulated(isa) ? 20 : 300;
    for (int i = 0; i < cases; ++i) {
      expect_kernel_matches(random_case(isa, rng, i, kSchemes[i % std::size(kSchemes)], 4));
      if (HasFailure()) return;
    }
  }
}

// Split keys (s8x2, s8x3): each row's digit rows through the integer kernels, summed in
// the epilogue, against the f32 rows' reference within the digits' residual.
TEST(WeightOnlyKernels, SplitRowsMatchTheF32Reference) {
  for (Isa isa : kernel_isas()) {
    int index = 0;
    for (const char* scheme : kSchemes)
      for (int digits : {2, 3})
        for (std::int64_t m : {1, 2, 3}) {
          if (emulated(isa) && index++ % 4 != 0) continue;
          for (std::int64_t n : {1, 15, 16, 17, 40, 130}) {
            test::KernelCase c = tail_case(isa, m, n, scheme, 4);
            c.split_digits = digits;
            c.unit_splits = 1 + int(n % 3);
            expect_kernel_matches(c);
            if (HasFailure()) return;
          }
        }
  }
}

TEST(WeightOnlyKernels, SplitRowsOnEveryBlockingThatFits) {
  for (Isa isa : kernel_isas()) {
    int checked = 0;
    for (const char* scheme : {"woq-int8", "woq-int4-g128", "woq-int4-g32-asym"})
      for (int digits : {2, 3})
        for (int nr = 1; nr <= 8; ++nr)
          for (int unroll : {1, 4}) {
            if (emulated(isa) && nr > 2) continue;
            test::KernelCase c;
            c.isa = isa;
            c.m = 2;
            c.n = 16 * nr + 5;
            c.k = 256;
            c.scheme = parse_quant_scheme(scheme);
            c.epilogue = float_epilogue(nr + digits);
            c.seed = 900 + nr * 7 + digits;
            c.split_digits = digits;
            c.blocking = {digits, nr, unroll, nr % 2 ? 0 : 512};
            c.default_blocking = false;
            GemmKey key = test::key_for(
                c,
                pack_weights(test::random_floats(c.n * c.k, 1, 1.f).data(), c.n, c.k, c.scheme, 1)
                    .header);
            if (!fits(key, c.blocking)) continue;
            expect_kernel_matches(c);
            ++checked;
            if (HasFailure()) return;
          }
    EXPECT_GT(checked, 0) << isa_name(isa);
  }
}

TEST(WeightOnlyKernels, SplitKeysTakeTilesOfTheirDigitRows) {
  GemmKey key;
  key.isa = Isa::avx512_vnni;
  key.n = 64;
  key.k = key.k_padded = key.group = 256;
  key.activation = ActivationKind::s8x3;
  key.bucket = MBucket::small;
  EXPECT_EQ(default_blocking(key).mr, 3);
  EXPECT_FALSE(fits(key, Blocking{1, 1, 4, 0}));
  EXPECT_FALSE(fits(key, Blocking{2, 1, 4, 0}));
  EXPECT_TRUE(fits(key, Blocking{3, 1, 4, 0}));
  EXPECT_FALSE(key.weight_only());
  EXPECT_EQ(kernel_name(key).rfind("gemm_u8s8x3_", 0), 0u) << kernel_name(key);
  key.blocking = default_blocking(key);
  key.epilogue.output = OutputKind::group_sums;
  EXPECT_THROW(GemmGenerator{key}, Error);
  key.epilogue.output = OutputKind::f32;
  key.isa = Isa::amx;
  EXPECT_THROW(AmxGenerator{key}, Error);
}

TEST(WeightOnlyKernels, EveryBlockingThatFits) {
  for (Isa isa : kernel_isas()) {
    int checked = 0;
    for (const char* scheme : {"woq-int8", "woq-int4-g64-asym", "woq-int8-g32", "woq-int4-g128"})
      for (int mr = 1; mr <= 8; ++mr)
        for (int nr = 1; nr <= 8; ++nr) {
          if (emulated(isa) && (mr + nr) % 3 != 0) continue;
          test::KernelCase c;
          c.isa = isa;
          c.m = mr + 2;
          c.n = 16 * nr + 5;
          c.k = 256;
          c.scheme = parse_quant_scheme(scheme);
          c.default_blocking = false;
          c.blocking = Blocking{mr, nr, 1 + (mr + nr) % 5, (mr % 2) * 512};
          c.epilogue = float_epilogue(mr * nr);
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
    EXPECT_GE(checked, 8) << isa_name(isa);
  }
}

TEST(WeightOnlyKernels, LlamaShapes) {
  struct Shape {
    std::int64_t n, k;
  };
  for (Isa isa : kernel_isas())
    for (const Shape s : {Shape{64, 4096}, Shape{48, 11008}})
      for (std::int64_t m : {1, 4, 33}) {
        if (emulated(isa) && (m > 1 || s.k > 4096)) continue;  // thousands of traps a call
        for (const char* scheme : {"woq-int8", "woq-int4-g128", "woq-int4-g32-asym"}) {
          test::KernelCase c;
          c.isa = isa;
          c.m = m;
          c.n = s.n;
          c.k = s.k;
          c.scheme = parse_quant_scheme(scheme);
          c.seed = s.n + s.k + m;
          c.unit_splits = 2;
          expect_kernel_matches(c);
          if (HasFailure()) return;
        }
      }
}

// bf16 kernels (int4 on zmm, vdpbf16ps on bf16 pairs of x looked-up nibbles): every tail
// class and epilogue, random shapes with unit splits, every blocking that fits and a
// Llama shape, against the reference over the same bf16-rounded activations.
const char* const kBf16Schemes[] = {"woq-int4-g32",  "woq-int4-g32-asym", "woq-int4-g128",
                                    "woq-int4-asym", "woq-int4-g256",     "woq-int4-g64-asym"};

TEST(WeightOnlyKernels, Bf16EveryTailBlockingAndShape) {
  if (!bf16_weight_only_runs())
    GTEST_SKIP() << "vdpbf16ps runs neither natively nor through the emulator here";
  const bool slow = emulated(Isa::avx512_vnni);
  int index = 0;
  for (const char* scheme : kBf16Schemes)
    for (std::int64_t m : {1, 2, 3, 5, 9})
      for (std::int64_t n : {1, 15, 16, 17, 40}) {
        if (slow && index++ % 3 != 0) continue;
        test::KernelCase c = tail_case(Isa::avx512_vnni, m, n, scheme, 8);
        c.bf16 = true;
        expect_kernel_matches(c);
        if (HasFailure()) return;
      }
  std::mt19937 rng(5);
  for (int i = 0; i < (slow ? 12 : 150); ++i) {
    test::KernelCase c =
        random_case(Isa::avx512_vnni, rng, i, kBf16Schemes[i % std::size(kBf16Schemes)], 8);
    c.bf16 = true;
    expect_kernel_matches(c);
    if (HasFailure()) return;
  }
  int checked = 0;
  for (int mr = 1; mr <= 8; ++mr)
    for (int nr = 1; nr <= 8; ++nr) {
      if (slow && (mr + nr) % 3 != 0) continue;
      test::KernelCase c;
      c.isa = Isa::avx512_vnni;
      c.bf16 = true;
      c.m = mr + 2;
      c.n = 16 * nr + 5;
      c.k = 256;
      c.scheme = parse_quant_scheme(mr % 2 ? "woq-int4-g128" : "woq-int4-g64-asym");
      c.default_blocking = false;
      c.blocking = Blocking{mr, nr, 1 + (mr + nr) % 5, (mr % 2) * 512};
      c.epilogue = float_epilogue(mr * nr);
      const PackedHeader h = make_packed_header(c.n, c.k, c.scheme, c.epilogue.swiglu);
      if (!fits(test::key_for(c, h), c.blocking)) continue;
      expect_kernel_matches(c);
      ++checked;
      if (HasFailure()) return;
    }
  EXPECT_GE(checked, 8);
  test::KernelCase c;
  c.isa = Isa::avx512_vnni;
  c.bf16 = true;
  c.m = slow ? 1 : 33;
  c.n = 64;
  c.k = 4096;
  c.scheme = parse_quant_scheme("woq-int4-g128");
  c.unit_splits = 2;
  expect_kernel_matches(c);
}

// A one-unit SwiGLU decode tile reads its gate and up panels in turn (gemm_generator.h,
// panel_sequential_): f32 and (int4 on zmm) bf16 activations, one group and several,
// symmetric and asymmetric, N tails, K unrolls and prefetch distances, against the reference.
TEST(WeightOnlyKernels, OneUnitSwigluDecodeTilesReadTheirPanelsInTurn) {
  int index = 0;
  for (Isa isa : kernel_isas())
    for (bool bf16 : {false, true}) {
      if (bf16 && (isa != Isa::avx512_vnni || !bf16_weight_only_runs())) continue;
      for (const char* scheme : {"woq-int8", "woq-int4-g128", "woq-int4-g32-asym", "woq-int8-g64"})
        for (std::int64_t m : {1, 3})
          for (std::int64_t n : {16, 21, 40}) {
            const int i = index++;
            if (bf16 && std::string(scheme).find("int8") != std::string::npos) continue;
            if (emulated(isa) && i % 4 != 0) continue;
            test::KernelCase c;
            c.isa = isa;
            c.bf16 = bf16;
            c.m = m;
            c.n = n;
            c.k = 256;
            c.scheme = parse_quant_scheme(scheme);
            c.default_blocking = false;
            c.blocking = Blocking{static_cast<int>(m), 1, 1 + i % 4, (i % 3 == 2) * 256};
            c.epilogue = test::epilogue_number(i % 2 ? 3 : 7);  // SwiGLU, SwiGLU + u8
            c.seed = 7201 + i;
            c.unit_splits = 1 + i % 2;
            const GemmKey key = test::key_for(c, make_packed_header(n, c.k, c.scheme, true));
            if (!fits(key, c.blocking)) continue;
            const bool sliced =
                vector_isa_of(isa).vectors_per_panel() > 1 && key.bucket != MBucket::one;
            EXPECT_EQ(GemmGenerator{key}.panel_sequential(), !sliced) << test::describe(c);
            expect_kernel_matches(c);
            if (HasFailure()) return;
          }
    }
}

// Weight-only GEMV keys with four accumulator chains (GemmKey::woq_chains, Zen 4's, forced
// on here on every host where zmm runs): every blocking that fits the chains' registers,
// f32 and bf16 activations, N tails, one group and several, symmetric and asymmetric, plain
// and SwiGLU pairs, against the reference; wider tiles than one unit must fit too.
TEST(WeightOnlyKernels, FourChainGemvsMatchTheReference) {
  const auto isas = kernel_isas();
  if (std::find(isas.begin(), isas.end(), Isa::avx512_vnni) == isas.end())
    GTEST_SKIP() << "avx512-vnni runs neither natively nor through the emulator here";
  const bool slow = emulated(Isa::avx512_vnni);
  int checked = 0, wide = 0, index = 0;
  for (bool bf16 : {false, true}) {
    if (bf16 && !bf16_weight_only_runs()) continue;
    for (const char* scheme : {"woq-int8", "woq-int4-g128", "woq-int4-g32-asym", "woq-int8-g64"}) {
      if (bf16 && std::string(scheme).find("int8") != std::string::npos) continue;
      for (int nr = 1; nr <= 8; ++nr)
        for (bool swiglu : {false, true}) {
          const int i = index++;
          if (slow && i % 3 != 0) continue;
          test::KernelCase c;
          c.isa = Isa::avx512_vnni;
          c.bf16 = bf16;
          c.m = 1;
          c.n = 16 * nr + (i % 3 == 0 ? 0 : 5);
          c.k = 256;
          c.scheme = parse_quant_scheme(scheme);
          c.woq_chains = 1;
          c.default_blocking = false;
          c.blocking = Blocking{1, nr, 1 + i % 4, (i % 3 == 2) * 256};
          c.epilogue = swiglu ? test::epilogue_number(i % 2 ? 3 : 7) : float_epilogue(i);
          c.seed = 8101 + i;
          c.unit_splits = 1 + i % 2;
          const GemmKey key = test::key_for(c, make_packed_header(c.n, c.k, c.scheme, swiglu));
          ASSERT_TRUE(key.woq_chains);
          if (!fits(key, c.blocking)) continue;
          EXPECT_NE(kernel_name(key).find("u" + std::to_string(c.blocking.k_unroll) + "c4"),
                    std::string::npos)
              << kernel_name(key);
          expect_kernel_matches(c);
          ++checked;
          if (nr > 1) ++wide;
          if (HasFailure()) return;
        }
    }
  }
  EXPECT_GE(checked, slow ? 4 : 20);
  EXPECT_GE(wide, 1);
  // Chains are for weight-only zmm GEMVs: the generator refuses them elsewhere.
  GemmKey integer = gemm_key_for(make_packed_header(40, 256, parse_quant_scheme("int8")),
                                 Epilogue{}, Isa::avx512_vnni, 1);
  integer.woq_chains = true;
  integer.blocking = Blocking{1, 1, 4, 0};
  EXPECT_THROW(GemmGenerator{integer}, Error);
}

// bf16 keys are for int4 on zmm; the generator names what it refuses.
TEST(WeightOnlyKernels, Bf16KeysOnlyForInt4OnZmm) {
  const PackedHeader int4 = make_packed_header(40, 128, parse_quant_scheme("int4-g32"));
  const PackedHeader int8 = make_packed_header(40, 128, parse_quant_scheme("int8"));
  const GemmKey key = gemm_key_for(int4, Epilogue{}, Isa::avx512_vnni, 1, ActivationKind::bf16);
  EXPECT_NE(kernel_name(key).find("gemm_u8bf16_avx512vnni"), std::string::npos);
  EXPECT_TRUE(key.weight_only());
  EXPECT_THROW(
      GemmGenerator{gemm_key_for(int8, Epilogue{}, Isa::avx512_vnni, 1, ActivationKind::bf16)},
      Error);
  EXPECT_THROW(GemmGenerator{gemm_key_for(int4, Epilogue{}, Isa::avx2, 1, ActivationKind::bf16)},
               Error);
  EXPECT_EQ(parse_activation("bf16", "x"), ActivationKind::bf16);
  EXPECT_THROW(parse_activation("f16", "x"), Error);
}

// The weight-only layout is the W8A8 one and the key says which operand a kernel reads.
TEST(WeightOnlyKernels, KeyNamesTheActivationAndRefusesWhatItCannotServe) {
  const PackedHeader h = make_packed_header(40, 128, parse_quant_scheme("int4-g32"));
  GemmKey key = gemm_key_for(h, Epilogue{}, Isa::avx2, 1, ActivationKind::f32);
  EXPECT_NE(kernel_name(key).find("gemm_u8f32_avx2"), std::string::npos) << kernel_name(key);
  EXPECT_FALSE(key == gemm_key_for(h, Epilogue{}, Isa::avx2, 1, ActivationKind::s8));
  key.epilogue.output = OutputKind::group_sums;
  EXPECT_THROW(GemmGenerator{key}, Error);
  GemmKey tiles = gemm_key_for(h, Epilogue{}, Isa::amx, 64, ActivationKind::f32);
  EXPECT_THROW(AmxGenerator{tiles}, Error);
}

// A layer's problem: n x k random weights quantized by `scheme` (the oracle form), the
// weights it dequantizes to, and m rows of x at stride k + 7.
struct LayerProblem {
  std::int64_t m = 0, n = 75, k = 333;
  QuantizedTensor q;
  std::vector<float> deq, x;
  std::int64_t ldx() const { return k + 7; }
};

LayerProblem layer_problem(const char* scheme, std::int64_t m, std::uint64_t seed) {
  LayerProblem p;
  p.m = m;
  const auto w = test::random_floats(p.n * p.k, seed, 0.05f);
  p.x = test::random_floats(m * p.ldx(), seed + 1, 1.f);
  p.q = quantize_reference(w.data(), p.n, p.k, parse_quant_scheme(scheme));
  p.deq = dequantize(p.q);
  return p;
}

// max |y - x W^T| / max |x W^T| for y = the layer's output over the problem, x W^T in
// double over the dequantized weights (x rounded to bf16 first for the bf16 kernels).
double layer_error(const QuantizedLinear& layer, const LayerProblem& p, ThreadPool& pool) {
  FloatActivations scratch;
  std::vector<float> y(p.m * p.n);
  layer.forward_weight_only(p.x.data(), p.m, p.ldx(), scratch, EpilogueArgs{}, y.data(), p.n, pool);
  // (a one-row call of a split layer quantizes x itself into digit rows, unrounded)
  const bool bf16_x =
      layer.activation() == ActivationKind::bf16 && !(p.m == 1 && layer.split_digits() != 0);
  double err = 0, ref_norm = 0;
  for (std::int64_t r = 0; r < p.m; ++r)
    for (std::int64_t c = 0; c < p.n; ++c) {
      double want = 0;
      for (std::int64_t i = 0; i < p.k; ++i) {
        const float xi = p.x[r * p.ldx() + i];
        want += double(bf16_x ? bf16_to_f32(f32_to_bf16(xi)) : xi) * double(p.deq[c * p.k + i]);
      }
      err = std::max(err, std::fabs(double(y[r * p.n + c]) - want));
      ref_norm = std::max(ref_norm, std::fabs(want));
    }
  return err / ref_norm;
}

// The whole layer (activation copy, kernel, split over two threads) against y = x W^T in
// double over W = the dequantized weights (ops/quant/quantize.h), an independent path:
// no packed-layout accessors, no operand bias.
TEST(WeightOnlyKernels, LayerMatchesTheDequantizedWeightsInDouble) {
  ThreadPool pool(2);
  for (const char* name : {"woq-int8", "woq-int4-g32-asym", "woq-int4-g128", "woq-int8-g64-asym"})
    for (std::int64_t m : {1, 3, 20}) {
      const LayerProblem p = layer_problem(name, m, 91 + m);
      const WeightOnlyMath saved = weight_only_math();
      set_weight_only_math(WeightOnlyMath::f32);  // the f32 kernels, also where bf16 is native
      QuantizedLinear layer(pack_quantized(p.q, 1), Epilogue{}, best_isa(), ActivationKind::f32);
      set_weight_only_math(saved);
      ASSERT_TRUE(layer.weight_only());
      ASSERT_EQ(layer.activation(), ActivationKind::f32);
      // f16 offsets round a little beyond dequantize()'s s * (q - z); the float sums
      // add a few ulps of K.
      EXPECT_LT(layer_error(layer, p, pool), 2e-4) << name << " M " << m;
    }
}

// Under the automatic math a layer on a VNNI ISA splits its one-row calls into digit rows
// (kWeightOnlySplitDigits, int8 and int4 alike) and runs the split key; its output is still
// y = x W^T in double over the dequantized weights, x unrounded. Other calls, and layers
// on AVX2 or with the f32 math, run the float kernels.
TEST(WeightOnlyKernels, OneRowCallsSplitIntoDigitRowsOnVnni) {
  ThreadPool pool(2);
  const WeightOnlyMath saved = weight_only_math();
  const bool vnni = isa_usable(Isa::avx512_vnni) || isa_usable(Isa::avx_vnni);
  for (const char* name : {"woq-int8", "woq-int4-g128", "woq-int4-g32-asym", "woq-int8-g64-asym"})
    for (std::int64_t m : {1, 3}) {
      const LayerProblem p = layer_problem(name, m, 61 + m);
      set_weight_only_math(WeightOnlyMath::automatic);
      const QuantizedLinear layer(pack_quantized(p.q, 1), Epilogue{}, best_isa(),
                                  ActivationKind::f32);
      set_weight_only_math(WeightOnlyMath::f32);
      const QuantizedLinear f32_layer(pack_quantized(p.q, 1), Epilogue{}, best_isa(),
                                      ActivationKind::f32);
      set_weight_only_math(saved);
      EXPECT_EQ(f32_layer.split_digits(), 0);
      if (!vnni) {
        EXPECT_EQ(layer.split_digits(), 0) << "no VNNI ISA runs here";
        continue;
      }
      ASSERT_EQ(layer.split_digits(), 2) << name;
      const GemmKey key = layer.split_key();
      EXPECT_EQ(key.activation, ActivationKind::s8x2);
      EXPECT_EQ(key.blocking.mr, layer.split_digits());
      EXPECT_TRUE(key.isa == Isa::avx512_vnni || key.isa == Isa::avx_vnni) << isa_name(key.isa);
      const auto warm = layer.warmup_keys();
      EXPECT_NE(std::find(warm.begin(), warm.end(), key), warm.end());
      EXPECT_LT(layer_error(layer, p, pool), 2e-4) << name << " M " << m;
    }
}

// A bf16 layer (requested; int4 on zmm, natively or through the emulator) runs the
// vdpbf16ps kernels, and its output is y = bf16(x) W^T in double over the dequantized
// weights; an int8 layer asked for bf16 runs the f32 kernels.
TEST(WeightOnlyKernels, Bf16LayerMatchesTheDequantizedWeightsInDouble) {
  if (!bf16_weight_only_runs())
    GTEST_SKIP() << "vdpbf16ps runs neither natively nor through the emulator here";
  ThreadPool pool(2);
  for (const char* name : {"woq-int4-g32-asym", "woq-int4-g128"})
    for (std::int64_t m : {1, 3, 20}) {
      const LayerProblem p = layer_problem(name, m, 81 + m);
      QuantizedLinear layer(pack_quantized(p.q, 1), Epilogue{}, Isa::avx512_vnni,
                            ActivationKind::bf16);
      ASSERT_EQ(layer.activation(), ActivationKind::bf16);
      ASSERT_EQ(layer.key_for(m).activation, ActivationKind::bf16);
      EXPECT_LT(layer_error(layer, p, pool), 2e-4) << name << " M " << m;
      if (m == 1) {  // --woq-math f32 keeps the same layer on the f32 kernels
        const WeightOnlyMath saved = weight_only_math();
        set_weight_only_math(WeightOnlyMath::f32);
        const QuantizedLinear forced_f32(pack_quantized(p.q, 1), Epilogue{}, Isa::avx512_vnni,
                                         ActivationKind::f32);
        set_weight_only_math(saved);
        EXPECT_EQ(forced_f32.activation(), ActivationKind::f32);
      }
    }
  const auto w8 = test::random_floats(32 * 64, 3, 0.05f);
  QuantizedLinear int8(pack_weights(w8.data(), 32, 64, parse_quant_scheme("woq-int8"), 1),
                       Epilogue{}, Isa::avx512_vnni, ActivationKind::bf16);
  EXPECT_EQ(int8.activation(), ActivationKind::f32);
}

// Where AMX-BF16 runs (natively or through the emulator), a bf16 layer asked for AMX runs
// its prefill calls (M >= the AMX threshold) on tiles and the others on zmm; both give
// y = bf16(x) W^T in double over the dequantized weights. Int8 weight-only layers (f32
// math) stay off the tiles.
TEST(WeightOnlyKernels, Bf16LayerRunsPrefillOnAmxTiles) {
  if (!amx_bf16_runs() || !bf16_weight_only_runs())
    GTEST_SKIP() << "AMX-BF16 with AVX512-BF16 runs neither natively nor through the emulator here";
  ThreadPool pool(2);
  for (const char* name : {"woq-int4-g32-asym", "woq-int4-g128", "woq-int4-asym"})
    for (std::int64_t m : {std::int64_t{1}, amx_min_rows(), std::int64_t{45}}) {
      const LayerProblem p = layer_problem(name, m, 71 + m);
      QuantizedLinear layer(pack_quantized(p.q, 1), Epilogue{}, Isa::amx, ActivationKind::bf16);
      ASSERT_TRUE(layer.uses_amx()) << name;
      ASSERT_EQ(layer.activation(), ActivationKind::bf16);
      EXPECT_EQ(layer.key_for(m).isa, m >= amx_min_rows() ? Isa::amx : Isa::avx512_vnni);
      EXPECT_LT(layer_error(layer, p, pool), 2e-4) << name << " M " << m;
    }
  const auto w8 = test::random_floats(32 * 64, 4, 0.05f);
  QuantizedLinear int8(pack_weights(w8.data(), 32, 64, parse_quant_scheme("woq-int8"), 1),
                       Epilogue{}, Isa::amx, ActivationKind::bf16);
  EXPECT_FALSE(int8.uses_amx());
  EXPECT_EQ(int8.activation(), ActivationKind::f32);
}

}  // namespace
}  // namespace qforge
