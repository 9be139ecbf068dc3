// The search space and the CPU signature: the space proposes exactly the blockings that fit
// the register budget (never one that does not), the default first; the signature names
// everything it depends on, in characters a file name can hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "jit/gemm/blocking_space.h"
#include "jit/gemm/register_budget.h"
#include "jit/tune/cpu_signature.h"

namespace qforge {
namespace {

std::vector<GemmKey> every_kind_of_key() {
  std::vector<GemmKey> keys;
  for (Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512_vnni})
    for (int bits : {8, 4})
      for (std::int64_t group : {64, 1024})  // several groups | one group
        for (bool swiglu : {false, true})
          for (MBucket bucket : {MBucket::one, MBucket::small, MBucket::large}) {
            GemmKey key;
            key.isa = isa;
            key.n = 1000;
            key.k = 1024;
            key.k_padded = 1024;
            key.group = group;
            key.bits = bits;
            key.asymmetric = bits == 4;
            key.epilogue.swiglu = swiglu;
            key.epilogue.residual = !swiglu;
            key.bucket = bucket;
            keys.push_back(key);
          }
  return keys;
}

TEST(BlockingSpace, ProposesExactlyTheBlockingsThatFitDefaultFirst) {
  int rejected = 0;
  for (const GemmKey& key : every_kind_of_key()) {
    const std::vector<Blocking> candidates = blocking_candidates(key);
    ASSERT_FALSE(candidates.empty()) << kernel_name(key);
    EXPECT_EQ(candidates.front(), default_blocking(key)) << kernel_name(key);
    std::set<std::tuple<int, int, int, int>> proposed;
    for (const Blocking& b : candidates) {
      EXPECT_TRUE(fits(key, b)) << kernel_name(key) << " " << b.mr << "x" << b.nr;
      EXPECT_LE(b.mr, max_tile_rows(key.bucket));
      EXPECT_TRUE(proposed.insert(b.fields()).second) << "duplicate " << b.mr << "x" << b.nr;
    }
    // Against brute force over a wider grid: every fitting blocking of the space is there,
    // and nothing else.
    for (int mr = 1; mr <= 10; ++mr)
      for (int nr = 1; nr <= 10; ++nr)
        for (int unroll : {1, 2, 3, 4, 8})
          for (int prefetch : {0, 256, 512, 1024, 2048}) {
            const Blocking b{mr, nr, unroll, prefetch};
            const bool in_space = mr <= max_tile_rows(key.bucket) && nr <= kMaxTileUnits &&
                                  std::find(kUnrollChoices.begin(), kUnrollChoices.end(), unroll) !=
                                      kUnrollChoices.end() &&
                                  std::find(kPrefetchChoices.begin(), kPrefetchChoices.end(),
                                            prefetch) != kPrefetchChoices.end();
            const bool want = in_space && fits(key, b);
            EXPECT_EQ(proposed.count(b.fields()) == 1, want)
                << kernel_name(key) << " " << mr << "x" << nr << "u" << unroll << "p" << prefetch;
            rejected += in_space && !fits(key, b);
          }
  }
  EXPECT_GT(rejected, 1000);  // the register budget really cut the space
}

TEST(BlockingSpace, ZmmKeysHaveWiderTilesThanYmm) {
  GemmKey key = every_kind_of_key().front();
  key.bucket = MBucket::large;
  auto widest = [&](Isa isa) {
    key.isa = isa;
    int units = 0;
    for (const Blocking& b : blocking_candidates(key)) units = std::max(units, b.mr * b.nr);
    return units;
  };
  EXPECT_GT(widest(Isa::avx512_vnni), widest(Isa::avx2));
}

// A SwiGLU unit is two panels (gate and up), each with its own weight loads and dot
// products against one broadcast per row. Scored in units, the large-M default for Q8_0's
// gate/up pair on zmm was 4 x 3, its 24 accumulators leaving the float sums in the stack
// frame; scored in panels it is a tile whose sums stay in registers (measured 1.1-1.3x).
TEST(BlockingSpace, SwigluDefaultsCountBothPanelsOfAUnit) {
  GemmKey key;
  key.isa = Isa::avx512_vnni;
  key.n = 5632;
  key.k = key.k_padded = 2048;
  key.group = 32;
  key.bits = 8;
  key.bucket = MBucket::large;
  key.epilogue.swiglu = true;
  const Blocking b = default_blocking(key);
  const RegisterPlan plan = plan_registers(key, b);
  EXPECT_FALSE(plan.float_sums_in_memory) << kernel_name(key);
  EXPECT_EQ(plan.accumulators, b.mr * b.nr * 2);
  // The same key without the pair keeps its tile: one panel a unit was always counted right.
  GemmKey single = key;
  single.epilogue.swiglu = false;
  EXPECT_EQ(default_blocking(single).mr, 4);
  EXPECT_EQ(default_blocking(single).nr, 3);
}

// Zen 4 (family 19h with AVX-512) reads zmm decode tiles without software prefetch (but an
// int8 split key's one stream 4 KB ahead) and an integer zmm GEMV as one stream per tile, and gives
// an int4 / int5 GEMM tile at most two panels (taller tiles) with prefetch; every other CPU, AVX2,
// int8 and weight-only GEMMs keep the general rule.
TEST(TileStreaming, Zen4DecodeTilesReadWithoutPrefetchAndSubByteGemmTilesAreTall) {
  CpuInfo zen4;
  zen4.vendor = "AuthenticAMD";
  zen4.family = 25;
  zen4.model = 17;
  zen4.isa.avx512f = zen4.isa.avx512_vnni = true;
  CpuInfo zen3 = zen4, zen5 = zen4, intel = zen4;
  zen3.isa.avx512f = false;
  zen5.family = 26;
  intel.vendor = "GenuineIntel";
  intel.family = 6;

  GemmKey gemv;
  gemv.isa = Isa::avx512_vnni;
  gemv.n = 2048;
  gemv.k = gemv.k_padded = gemv.group = 2048;
  gemv.bucket = MBucket::one;
  GemmKey int4_gemm = gemv;
  int4_gemm.bucket = MBucket::large;
  int4_gemm.bits = 4;
  int4_gemm.group = 32;
  EXPECT_EQ(tile_streaming_for(zen4, gemv), kZen4GemvStreaming);
  EXPECT_EQ(tile_streaming_for(zen4, int4_gemm), kZen4SubByteGemmStreaming);
  for (const CpuInfo& other : {zen3, zen5, intel}) {
    EXPECT_EQ(tile_streaming_for(other, gemv), kGeneralDecodeStreaming) << other.family;
    EXPECT_EQ(tile_streaming_for(other, int4_gemm), kGeneralGemmStreaming) << other.family;
  }
  GemmKey woq = gemv, avx2 = gemv, small = gemv, int8_gemm = gemv, int5_gemm = int4_gemm;
  woq.activation = ActivationKind::f32;
  avx2.isa = Isa::avx2;
  small.bucket = MBucket::small;
  int8_gemm.bucket = MBucket::large;
  int5_gemm.bits = 5;
  GemmKey woq_gemm = int4_gemm, avx2_gemm = int4_gemm;
  woq_gemm.activation = ActivationKind::bf16;
  avx2_gemm.isa = Isa::avx2;
  GemmKey woq_small = woq;
  woq_small.bucket = MBucket::small;
  EXPECT_EQ(tile_streaming_for(zen4, woq), kZen4GemvStreaming);  // a weight-only GEMV too
  // A one-row call split into digit rows (its bucket: small): int8 weights stream one
  // unit far ahead, ...
  GemmKey split = small;
  split.activation = ActivationKind::s8x2;
  EXPECT_EQ(tile_streaming_for(zen4, split), kZen4Int8SplitStreaming);
  const Blocking int8_split = default_blocking(split, kZen4Int8SplitStreaming);
  EXPECT_EQ(int8_split, (Blocking{2, 1, 4, 4096}));
  GemmKey int8_pair = split;  // ... but not a SwiGLU pair: 2 x 2048 digit bytes, one unit
  int8_pair.epilogue.swiglu = true;
  EXPECT_EQ(tile_streaming_for(zen4, int8_pair), kZen4GemvStreaming);
  GemmKey int4_split = split;  // int4: 2 x 2048 digit bytes, one unit without prefetch
  int4_split.bits = 4;
  int4_split.group = 128;
  EXPECT_EQ(tile_streaming_for(zen4, int4_split), kZen4GemvStreaming);
  EXPECT_EQ(default_blocking(int4_split).mr, 2);
  GemmKey wide_split = int4_split;  // 2 x 5632 digit bytes: up to 4 units share each broadcast
  wide_split.k = wide_split.k_padded = 5632;
  EXPECT_EQ(tile_streaming_for(zen4, wide_split), kZen4WideSplitStreaming);
  EXPECT_EQ(default_blocking(wide_split, kZen4WideSplitStreaming).nr, 4);
  EXPECT_EQ(default_blocking(wide_split, kZen4WideSplitStreaming).mr, 2);
  for (const CpuInfo& other : {zen3, zen5, intel})
    for (const GemmKey& key : {split, int4_split})
      EXPECT_EQ(tile_streaming_for(other, key), kGeneralDecodeStreaming) << other.family;
  for (const GemmKey& key : {woq_small, small})
    EXPECT_EQ(tile_streaming_for(zen4, key), kZen4DecodeStreaming) << kernel_name(key);
  // ... summing in four chains there (GemmKey::woq_chains), and nowhere else.
  EXPECT_TRUE(weight_only_gemv_chains(zen4, woq));
  for (const GemmKey& key : {woq_small, gemv, small, avx2})
    EXPECT_FALSE(weight_only_gemv_chains(zen4, key)) << kernel_name(key);
  for (const CpuInfo& other : {zen3, zen5, intel})
    EXPECT_FALSE(weight_only_gemv_chains(other, woq)) << other.family;
  EXPECT_EQ(tile_streaming_for(zen4, avx2), kGeneralDecodeStreaming);
  EXPECT_EQ(tile_streaming_for(zen4, int5_gemm), kZen4SubByteGemmStreaming);
  for (const GemmKey& key : {int8_gemm, woq_gemm, avx2_gemm})
    EXPECT_EQ(tile_streaming_for(zen4, key), kGeneralGemmStreaming) << kernel_name(key);
  const Blocking woq_tile = default_blocking(woq_small, kZen4DecodeStreaming);
  EXPECT_EQ(woq_tile.nr, default_blocking(woq_small, kGeneralDecodeStreaming).nr);
  EXPECT_EQ(woq_tile.prefetch_distance, 0);

  const Blocking general = default_blocking(gemv, kGeneralDecodeStreaming);
  EXPECT_EQ(general.nr, 8);
  EXPECT_EQ(general.prefetch_distance, 1024);
  GemmKey pair = gemv;
  pair.epilogue.swiglu = true;
  GemmKey chained = woq, chained_pair = pair, chained_bf16 = gemv;
  chained.woq_chains = chained_pair.woq_chains = chained_bf16.woq_chains = true;
  chained_pair.activation = ActivationKind::f32;
  chained_bf16.activation = ActivationKind::bf16;
  chained_bf16.bits = 4;
  chained_bf16.group = 128;
  for (const GemmKey& key : {gemv, pair, chained, chained_pair, chained_bf16}) {
    const Blocking one = default_blocking(key, kZen4GemvStreaming);
    EXPECT_EQ(one.mr, 1);
    EXPECT_EQ(one.nr, 1) << kernel_name(key);
    EXPECT_EQ(one.prefetch_distance, 0);
    EXPECT_TRUE(fits(key, one));
  }

  // The int4 g32 GEMM: 4 x 3 in general (its 12 float sums in registers), 6 x 2 on Zen 4;
  // a SwiGLU pair 6 x 1 (two panels), every float sum still in registers.
  const Blocking wide = default_blocking(int4_gemm, kGeneralGemmStreaming);
  EXPECT_EQ(wide.mr, 4);
  EXPECT_EQ(wide.nr, 3);
  EXPECT_EQ(wide.prefetch_distance, 0);
  GemmKey int4_pair = int4_gemm;
  int4_pair.epilogue.swiglu = true;
  for (const GemmKey& key : {int4_gemm, int4_pair}) {
    const Blocking tall = default_blocking(key, kZen4SubByteGemmStreaming);
    EXPECT_EQ(tall.mr, 6) << kernel_name(key);
    EXPECT_EQ(tall.nr * key.panels_per_unit(), 2) << kernel_name(key);
    EXPECT_EQ(tall.prefetch_distance, 1024);
    EXPECT_FALSE(plan_registers(key, tall).float_sums_in_memory) << kernel_name(key);
  }
  // The host's own default is its rule's.
  for (const GemmKey& key : {gemv, int4_gemm})
    EXPECT_EQ(default_blocking(key), default_blocking(key, tile_streaming_for(cpu_info(), key)));
}

CpuInfo sample_cpu() {
  CpuInfo cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.family = 25;
  cpu.model = 1;
  cpu.stepping = 1;
  cpu.isa.avx2 = cpu.isa.fma = cpu.isa.f16c = cpu.isa.os_ymm = true;
  cpu.cores = 2;
  cpu.l2_bytes = 512 * 1024;
  return cpu;
}

TEST(CpuSignature, NamesVendorModelIsasCoresAndL2) {
  EXPECT_EQ(cpu_signature(sample_cpu()), "AuthenticAMD-25-1-1_avx2_c2_l2-512k");
  CpuInfo big = sample_cpu();
  big.vendor = "Genuine Intel/\x01";
  big.isa.avx512f = big.isa.avx512bw = big.isa.avx512vl = big.isa.avx512dq = true;
  big.isa.avx512_vnni = big.isa.avx_vnni = true;
  big.l2_bytes = 2u << 20;
  big.cores = 56;
  EXPECT_EQ(cpu_signature(big), "Genuine_Intel__-25-1-1_avx2.avx-vnni.avx512-vnni_c56_l2-2m");
}

TEST(CpuSignature, EveryFieldChangesIt) {
  const std::string base = cpu_signature(sample_cpu());
  std::vector<CpuInfo> changed(6, sample_cpu());
  changed[0].vendor = "GenuineIntel";
  changed[1].family = 6;
  changed[2].model = 2;
  changed[3].stepping = 2;
  changed[4].cores = 4;
  changed[5].l2_bytes = 1 << 20;
  std::set<std::string> all = {base};
  for (const CpuInfo& cpu : changed) all.insert(cpu_signature(cpu));
  EXPECT_EQ(all.size(), changed.size() + 1);
}

TEST(CpuSignature, ThisMachinesIsFileNameSafe) {
  const std::string s = cpu_signature();
  ASSERT_FALSE(s.empty());
  for (char c : s)
    EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')
        << s;
  EXPECT_EQ(default_tuning_path(s).filename(), s + ".json");
}

}  // namespace
}  // namespace qforge
