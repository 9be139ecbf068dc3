// Which kernel a quantized layer calls: AMX at and above the row threshold when AMX is
// usable, the zmm kernels below it and for layers the AMX generator cannot serve; the
// warm-up covers both; and either way the layer's output is the reference's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "ops/linear/quantized_linear.h"
#include "ops/ref/gemm_reference.h"
#include "tests/support/random_data.h"

namespace qforge {
namespace {

PackedWeights random_layer(std::int64_t n, std::int64_t k, const char* scheme) {
  const auto w = test::random_floats(n * k, n + k, 0.05f);
  return pack_weights(w.data(), n, k, parse_quant_scheme(scheme), 1);
}

// Restores the threshold and the ISA cap a test changes.
class AmxDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!isa_usable(Isa::amx)) GTEST_SKIP() << "AMX is neither native nor emulated here";
  }
  void TearDown() override {
    set_amx_min_rows(kDefaultAmxMinRows);
    set_max_isa(cap_);
  }
  Isa cap_ = max_isa();
};

TEST_F(AmxDispatch, AmxFromTheThresholdOnZmmBelow) {
  const QuantizedLinear layer(random_layer(48, 256, "int8-g128"), Epilogue{});
  ASSERT_TRUE(layer.uses_amx());
  EXPECT_EQ(layer.isa(), Isa::avx512_vnni);
  ASSERT_EQ(amx_min_rows(), 16);
  for (const std::int64_t m : {1, 4, 5, 15}) EXPECT_EQ(layer.key_for(m).isa, Isa::avx512_vnni) << m;
  for (const std::int64_t m : {16, 17, 128}) EXPECT_EQ(layer.key_for(m).isa, Isa::amx) << m;
  set_amx_min_rows(3);
  EXPECT_EQ(layer.key_for(2).isa, Isa::avx512_vnni);
  EXPECT_EQ(layer.key_for(3).isa, Isa::amx);
  EXPECT_THROW(set_amx_min_rows(0), Error);
}

TEST_F(AmxDispatch, WarmupCoversAmxAndTheZmmBucketsBelowIt) {
  const QuantizedLinear layer(random_layer(32, 128, "int4-g64"), Epilogue{});
  ASSERT_TRUE(layer.uses_amx());
  for (const std::int64_t threshold : {16, 3, 300}) {
    set_amx_min_rows(threshold);
    const std::vector<GemmKey> keys = layer.warmup_keys();
    for (const std::int64_t m : {1, 2, 3, 4, 5, 15, 16, 33, 128, 299, 300, 1000})
      EXPECT_NE(std::find(keys.begin(), keys.end(), layer.key_for(m)), keys.end())
          << "M " << m << " threshold " << threshold << ": " << kernel_name(layer.key_for(m));
  }
}

// The GGUF block size takes K steps of 32 on tiles; groups that are no multiple of 32
// stay on zmm.
TEST_F(AmxDispatch, GroupsOf32RunOnTilesOthersStayOnZmm) {
  const QuantizedLinear g32(random_layer(32, 128, "int4-g32"), Epilogue{});
  EXPECT_TRUE(g32.uses_amx());
  EXPECT_EQ(g32.key_for(128).isa, Isa::amx);
  const QuantizedLinear g40(random_layer(32, 120, "int4-g40"), Epilogue{});
  EXPECT_FALSE(g40.uses_amx());
  EXPECT_EQ(g40.key_for(128).isa, Isa::avx512_vnni);
}

TEST_F(AmxDispatch, CappedBelowAmxStaysOnZmm) {
  set_max_isa(Isa::avx512_vnni);
  const QuantizedLinear layer(random_layer(32, 128, "int8"), Epilogue{});
  EXPECT_FALSE(layer.uses_amx());
  EXPECT_EQ(layer.key_for(128).isa, Isa::avx512_vnni);
}

// The AMX kernel replaces the dot products only: dequantization and epilogue are the zmm
// kernel's code, so the outputs are identical bit for bit.
TEST_F(AmxDispatch, AmxAndZmmOutputsAreBitIdentical) {
  const std::int64_t n = 50, k = 384, m = 37;
  const Epilogue epilogues[] = {Epilogue{}, Epilogue{true, false, true, OutputKind::f32},
                                Epilogue{false, true, false, OutputKind::f32},
                                Epilogue{false, false, false, OutputKind::u8}};
  for (const char* scheme : {"int8", "int4-g128", "int8-g64-asym", "int4-asym", "int8-g32"})
    for (const Epilogue& epilogue : epilogues) {
      const auto w = test::random_floats(n * k, 3, 0.05f),
                 up = test::random_floats(n * k, 4, 0.05f);
      const QuantScheme s = parse_quant_scheme(scheme);
      const QuantizedLinear layer(epilogue.swiglu
                                      ? pack_swiglu_pair(w.data(), up.data(), n, k, s, 1)
                                      : pack_weights(w.data(), n, k, s, 1),
                                  epilogue);
      ASSERT_TRUE(layer.uses_amx());
      const auto x = test::random_floats(m * k, 5, 1.f), bias = test::random_floats(n, 6, 1.f);
      QuantizedActivations xq;
      prepare_activations(xq, m, k, layer.weights().header.k_padded, layer.weights().header.group);
      quantize_activations(x.data(), k, xq);
      ThreadPool pool(1);
      auto run = [&](std::int64_t threshold) {
        set_amx_min_rows(threshold);
        std::vector<float> out = test::random_floats(m * n, 7, 1.f);  // also the residual
        EpilogueArgs args;
        args.bias = bias.data();
        args.residual = out.data();
        args.ld_residual = n;
        args.out_scale = 0.05f;
        args.out_zero_point = 128;
        EXPECT_EQ(layer.key_for(m).isa, threshold <= m ? Isa::amx : Isa::avx512_vnni);
        layer.forward(xq, args, out.data(), n, pool);
        return out;
      };
      const std::vector<float> tiles = run(1), vectors = run(1000);
      EXPECT_EQ(std::memcmp(tiles.data(), vectors.data(), tiles.size() * sizeof(float)), 0)
          << scheme << " " << epilogue_name(epilogue);
    }
}

// forward() on both sides of the threshold, on two threads, with the residual added in
// place as the executor does (out == residual): rows of the overlapping last block
// (M = 41, 70) must be stored once.
TEST_F(AmxDispatch, ForwardMatchesTheReferenceOnBothSides) {
  const std::int64_t n = 80, k = 320;
  const QuantizedLinear layer(random_layer(n, k, "int8-g64-asym"),
                              Epilogue{false, false, true, OutputKind::f32});
  ASSERT_TRUE(layer.uses_amx());
  ThreadPool pool(2);
  const std::uint64_t emulated_before = emulate::emulated_instruction_count();
  for (const std::int64_t m : {15, 16, 41, 70}) {
    const auto x = test::random_floats(m * k, m, 1.f);
    const auto residual = test::random_floats(m * n, m + 1, 1.f);
    QuantizedActivations xq;
    prepare_activations(xq, m, k, layer.weights().header.k_padded, layer.weights().header.group);
    quantize_activations(x.data(), k, xq);
    EpilogueArgs args;
    args.residual = residual.data();
    args.ld_residual = n;
    std::vector<float> want(m * n);
    gemm_reference(layer.weights(), xq, layer.epilogue(), args, want.data(), n);
    std::vector<float> got = residual;
    args.residual = got.data();
    layer.forward(xq, args, got.data(), n, pool);  // 2 M N K >= 2^21: split over the pool
    for (std::int64_t i = 0; i < m * n; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-6f * std::fabs(want[i])) << "M " << m << " element " << i;
  }
  if (!(hardware_isa_mask(cpu_info()) & isa_bit(Isa::amx))) {
    EXPECT_GT(emulate::emulated_instruction_count(), emulated_before);
  }
}

}  // namespace
}  // namespace qforge
