#include <gtest/gtest.h>

#include "jit/base/error.h"
#include "ops/quant/packed_layout.h"
#include "ops/quant/scheme.h"

namespace qforge {
namespace {

TEST(QuantScheme, ParsesEveryForm) {
  EXPECT_EQ(parse_quant_scheme("int8"), (QuantScheme{8, false, Granularity::per_channel, 0}));
  EXPECT_EQ(parse_quant_scheme("int4-g128"), (QuantScheme{4, false, Granularity::per_group, 128}));
  EXPECT_EQ(parse_quant_scheme("int8-g32-asym"),
            (QuantScheme{8, true, Granularity::per_group, 32}));
  EXPECT_EQ(parse_quant_scheme("int4-asym"), (QuantScheme{4, true, Granularity::per_channel, 0}));
  EXPECT_EQ(parse_quant_scheme("int8-tensor"), (QuantScheme{8, false, Granularity::per_tensor, 0}));
  EXPECT_EQ(parse_quant_scheme("int5-g32-asym"),
            (QuantScheme{5, true, Granularity::per_group, 32}));
  for (const char* name : {"int8", "int4-g64", "int8-g36-asym", "int8-tensor-asym", "int5",
                           "int5-g32-sb256-asym", "int5-g64"})
    EXPECT_EQ(to_string(parse_quant_scheme(name)), name);
}

TEST(QuantScheme, RejectsBadFormsWithTheReason) {
  for (const char* bad :
       {"int3", "int8-g", "int8-gx", "int8-g30", "int4-g36", "int8-g0", "int8-g131072", "fp8",
        "int8-g32-sym", "int5-g16", "int5-g48", "woq-int5-g32", "int6"}) {
    try {
      parse_quant_scheme(bad, "--quant");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--quant"), std::string::npos) << e.what();
    }
  }
}

TEST(PackedLayout, SizesFollowTheDesign) {
  // int8 per-channel: K = 100 -> Kp = 128, one group of 32 rows; N = 17 -> 2 panels.
  PackedHeader h = make_packed_header(17, 100, parse_quant_scheme("int8"));
  PackedGeometry g = geometry_of(h);
  EXPECT_EQ(h.k_padded, 128);
  EXPECT_EQ(h.group, 128);
  EXPECT_EQ(h.n_padded, 32);
  EXPECT_EQ(g.rows_per_group, 32);
  EXPECT_EQ(g.group_bytes, 32 * 64 + 32);
  EXPECT_EQ(g.total_bytes, 2 * (32 * 64 + 32));
  // int4 g32 asym: K = 70 -> Kp = 96, 3 groups of 4 rows + 64-byte trailer.
  h = make_packed_header(16, 70, parse_quant_scheme("int4-g32-asym"));
  g = geometry_of(h);
  EXPECT_EQ(h.k_padded, 96);
  EXPECT_EQ(g.groups, 3);
  EXPECT_EQ(g.rows_per_group, 4);
  EXPECT_EQ(g.panel_bytes, 3 * (4 * 64 + 64));
  // Interleaved pair: both halves' panels.
  h = make_packed_header(20, 64, parse_quant_scheme("int8"), true);
  EXPECT_EQ(h.n_padded, 64);
  EXPECT_EQ(geometry_of(h).panels, 4);
  // Every group starts 32-byte aligned (half a cache line).
  for (const char* s : {"int8", "int4", "int8-g36", "int4-g40-asym", "int8-tensor"})
    for (int k : {4, 12, 100, 4096}) {
      const PackedGeometry geo = geometry_of(make_packed_header(5, k, parse_quant_scheme(s)));
      EXPECT_EQ(geo.group_bytes % 32, 0) << s << " K " << k;
    }
  EXPECT_NO_THROW(validate(make_packed_header(33, 4096, parse_quant_scheme("int4-g128"))));
}

// Layout v3 costs what a GGUF block costs: at g32 exactly Q8_0 (34 bytes per 32 weights),
// Q4_0 (18) and Q4_1 (20); any scheme at most bits / 8 + 2 / g bytes per weight
// (+ 2 / g asymmetric), once K and N are whole panels and groups.
TEST(PackedLayout, BytesPerWeightAreTheGgufBlocks) {
  const std::int64_t n = 64, k = 4096, weights = n * k;
  auto bytes_of = [&](const char* scheme) {
    return geometry_of(make_packed_header(n, k, parse_quant_scheme(scheme))).total_bytes;
  };
  EXPECT_EQ(bytes_of("int8-g32"), weights / 32 * 34);
  EXPECT_EQ(bytes_of("int4-g32"), weights / 32 * 18);
  EXPECT_EQ(bytes_of("int4-g32-asym"), weights / 32 * 20);
  EXPECT_EQ(bytes_of("int5-g32"), weights / 32 * 22);       // Q5_0
  EXPECT_EQ(bytes_of("int5-g32-asym"), weights / 32 * 24);  // Q5_1
  // Q5_K: 176 bytes per 256, and a 64-byte header per panel's super-block of 16 x 256.
  EXPECT_EQ(bytes_of("int5-g32-sb256-asym"), weights / 256 * 176 + weights / (16 * 256) * 64);
  for (const char* name :
       {"int8", "int8-asym", "int4", "int4-asym", "int8-g64", "int8-g128-asym", "int4-g64",
        "int4-g128", "int4-g256-asym", "int8-g256", "int5", "int5-g64-asym", "int5-g128"}) {
    const QuantScheme scheme = parse_quant_scheme(name);
    const double g = scheme.granularity == Granularity::per_group ? scheme.group : double(k);
    const double bound = scheme.bits / 8.0 + (scheme.asymmetric ? 4.0 : 2.0) / g;
    EXPECT_LE(double(bytes_of(name)) / double(weights), bound) << name;
  }
}

TEST(PackedLayout, RejectsBadShapes) {
  EXPECT_THROW(make_packed_header(0, 64, parse_quant_scheme("int8")), Error);
  EXPECT_THROW(make_packed_header(16, 0, parse_quant_scheme("int8")), Error);
  EXPECT_THROW(make_packed_header(16, -4, parse_quant_scheme("int8")), Error);
  EXPECT_THROW(make_packed_header(16, 70000, parse_quant_scheme("int8")),
               Error);  // per-channel bound
  PackedHeader h = make_packed_header(16, 64, parse_quant_scheme("int8"));
  h.magic = 0;
  EXPECT_THROW(validate(h), Error);
  h = make_packed_header(16, 64, parse_quant_scheme("int8"));
  h.total_bytes += 64;
  EXPECT_THROW(validate(h), Error);
}

}  // namespace
}  // namespace qforge
