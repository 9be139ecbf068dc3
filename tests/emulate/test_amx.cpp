// AMX tiles against their SDM definitions: configuration (load, store, release, RIP-
// relative), tile loads/stores with partial shapes and strides, tilezero, the four int8
// dot products and the bf16 one, a small tiled GEMM against a scalar matmul, independent
// per-thread tile state, and the shape errors that raise #UD.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "jit/emulate/emulator.h"
#include "tests/emulate/emulate_harness.h"
#include "tests/emulate/float_inputs.h"

namespace qforge::emulate::test {
namespace {

using Xbyak::Tmm;
namespace reg = Xbyak::util;

// The 64-byte LDTILECFG operand (palette 1).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};

  TileConfig& shape(unsigned tile, unsigned tile_rows, unsigned bytes_per_row) {
    rows[tile] = static_cast<std::uint8_t>(tile_rows);
    colsb[tile] = static_cast<std::uint16_t>(bytes_per_row);
    return *this;
  }
};
static_assert(sizeof(TileConfig) == 64);

class AmxTest : public EmulatorTest {};

std::vector<std::uint8_t> random_bytes(Random& random, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  for (auto& b : v) b = static_cast<std::uint8_t>(random.next());
  return v;
}

// tmm2 <- [rsi + rcx * 1] (stride rcx), [rdx + rcx * 1] <- tmm2, for each shape/stride.
TEST_F(AmxTest, LoadAndStorePartialTilesWithStrides) {
  struct Shape {
    unsigned rows, colsb;
  };
  for (Shape s :
       {Shape{16, 64}, Shape{5, 12}, Shape{1, 4}, Shape{16, 36}, Shape{7, 64}, Shape{3, 1}}) {
    for (std::uint64_t stride : {std::uint64_t{s.colsb}, std::uint64_t{100}, std::uint64_t{256}}) {
      for (bool t1 : {false, true}) {
        using namespace reg;
        Jit jit;
        jit.ldtilecfg(jit.ptr[rdi]);
        if (t1) {
          jit.tileloaddt1(Tmm(2), jit.ptr[rsi + rcx * 1]);
        } else {
          jit.tileloadd(Tmm(2), jit.ptr[rsi + rcx * 1]);
        }
        jit.tilestored(jit.ptr[rdx + rcx * 1], Tmm(2));
        jit.tilerelease();
        TileConfig config;
        config.shape(2, s.rows, s.colsb);
        Random random(s.rows * 1000 + stride);
        const std::vector<std::uint8_t> source = random_bytes(random, 16 * 256);
        std::vector<std::uint8_t> destination = random_bytes(random, 16 * 256),
                                  expected = destination;
        for (unsigned r = 0; r < s.rows; ++r)
          std::memcpy(&expected[r * stride], &source[r * stride], s.colsb);
        jit.run(&config, const_cast<std::uint8_t*>(source.data()), destination.data(),
                reinterpret_cast<void*>(stride));
        EXPECT_EQ(destination, expected) << (t1 ? "tileloaddt1" : "tileloadd") << " " << s.rows
                                         << "x" << s.colsb << " stride " << stride;
      }
    }
  }
}

// The row address is base + disp, the stride index * scale: [rsi + rcx * 4 + 8].
TEST_F(AmxTest, SibAddressingScalesTheStride) {
  using namespace reg;
  Jit jit;
  jit.ldtilecfg(jit.ptr[rdi]);
  jit.tileloadd(Tmm(0), jit.ptr[rsi + rcx * 4 + 8]);
  jit.tilestored(jit.ptr[rdx + rcx * 2 - 16], Tmm(0));
  TileConfig config;
  config.shape(0, 4, 16);
  Random random(9);
  const std::vector<std::uint8_t> source = random_bytes(random, 1024);
  std::vector<std::uint8_t> destination(1024, 0xEE), expected = destination;
  const std::uint64_t index = 20;  // load stride 80, store stride 40
  for (unsigned r = 0; r < 4; ++r)
    std::memcpy(&expected[16 + r * 40 - 16], &source[8 + r * 80], 16);
  jit.run(&config, const_cast<std::uint8_t*>(source.data()), destination.data() + 16,
          reinterpret_cast<void*>(index));
  EXPECT_EQ(destination, expected);
}

TEST_F(AmxTest, StoreConfigReleaseAndZero) {
  using namespace reg;
  Jit jit;
  jit.ldtilecfg(jit.ptr[rdi]);
  jit.sttilecfg(jit.ptr[rsi]);
  jit.tileloadd(Tmm(5), jit.ptr[rdx + rcx * 1]);
  jit.tilestored(jit.ptr[rsi + 64 + rcx * 1], Tmm(5));
  jit.tilezero(Tmm(5));
  jit.tilestored(jit.ptr[rsi + 1024 + 64 + rcx * 1], Tmm(5));
  jit.tilerelease();
  jit.sttilecfg(jit.ptr[rsi + 4096]);
  TileConfig config;
  config.shape(0, 16, 64).shape(5, 3, 20).shape(7, 1, 4);
  Random random(4);
  const std::vector<std::uint8_t> source = random_bytes(random, 1024);
  std::vector<std::uint8_t> out(4096 + 64, 0xEE);
  jit.run(&config, out.data(), const_cast<std::uint8_t*>(source.data()),
          reinterpret_cast<void*>(std::uint64_t{32}));
  EXPECT_EQ(std::memcmp(out.data(), &config, 64), 0)
      << "sttilecfg returns the loaded configuration";
  for (unsigned r = 0; r < 3; ++r) {
    EXPECT_EQ(std::memcmp(&out[64 + r * 32], &source[r * 32], 20), 0)
        << "tileloadd/tilestored row " << r;
    for (unsigned b = 0; b < 20; ++b)
      EXPECT_EQ(out[1024 + 64 + r * 32 + b], 0) << "tilezero row " << r;
  }
  for (unsigned b = 0; b < 64; ++b)
    EXPECT_EQ(out[4096 + b], 0) << "sttilecfg after tilerelease, byte " << b;
}

TEST_F(AmxTest, RipRelativeConfiguration) {
  using namespace reg;
  Jit jit;
  Xbyak::Label config_label;
  jit.ldtilecfg(jit.ptr[rip + config_label]);
  jit.tileloadd(Tmm(1), jit.ptr[rdi + rcx * 1]);
  jit.tilestored(jit.ptr[rsi + rcx * 1], Tmm(1));
  jit.tilerelease();
  jit.ret();
  jit.align(64);
  jit.L(config_label);
  TileConfig config;
  config.shape(1, 2, 8);
  jit.db(reinterpret_cast<const std::uint8_t*>(&config), sizeof config);
  std::vector<std::uint8_t> source(256), destination(256, 0);
  for (unsigned i = 0; i < 256; ++i) source[i] = static_cast<std::uint8_t>(i + 1);
  std::vector<std::uint8_t> expected(256, 0);
  for (unsigned r = 0; r < 2; ++r) std::memcpy(&expected[r * 64], &source[r * 64], 8);
  jit.run(source.data(), destination.data(), nullptr, reinterpret_cast<void*>(std::uint64_t{64}));
  EXPECT_EQ(destination, expected);
}

// C (m x n dwords) += A (m x k dword groups of 4 bytes) . B (k rows x n dwords), int32 wrap.
template <bool kSignedA, bool kSignedB>
std::vector<std::int32_t> dot_product_reference(const std::vector<std::int32_t>& c,
                                                const std::vector<std::uint8_t>& a,
                                                const std::vector<std::uint8_t>& b, unsigned m,
                                                unsigned n, unsigned k) {
  std::vector<std::int32_t> result = c;
  for (unsigned i = 0; i < m; ++i)
    for (unsigned j = 0; j < n; ++j) {
      std::uint32_t acc = static_cast<std::uint32_t>(c[i * 16 + j]);
      for (unsigned kk = 0; kk < k; ++kk)
        for (unsigned q = 0; q < 4; ++q) {
          const std::int64_t x =
              kSignedA ? static_cast<std::int8_t>(a[i * 64 + 4 * kk + q]) : a[i * 64 + 4 * kk + q];
          const std::int64_t y =
              kSignedB ? static_cast<std::int8_t>(b[kk * 64 + 4 * j + q]) : b[kk * 64 + 4 * j + q];
          acc += static_cast<std::uint32_t>(x * y);
        }
      result[i * 16 + j] = static_cast<std::int32_t>(acc);
    }
  return result;
}

using TileDot = void (Xbyak::CodeGenerator::*)(const Tmm&, const Tmm&, const Tmm&);

template <bool kSignedA, bool kSignedB>
void check_int8_dot_product(const char* name, TileDot emit) {
  struct Shape {
    unsigned m, n, k;
  };
  for (Shape s :
       {Shape{16, 16, 16}, Shape{3, 5, 7}, Shape{1, 1, 1}, Shape{16, 4, 9}, Shape{8, 16, 2}}) {
    using namespace reg;
    Jit jit;  // rdi config, rsi C, rdx A, rcx B; all rows 64 bytes apart
    jit.ldtilecfg(jit.ptr[rdi]);
    jit.mov(rax, 64);
    jit.tileloadd(Tmm(0), jit.ptr[rsi + rax * 1]);
    jit.tileloadd(Tmm(1), jit.ptr[rdx + rax * 1]);
    jit.tileloadd(Tmm(2), jit.ptr[rcx + rax * 1]);
    (jit.*emit)(Tmm(0), Tmm(1), Tmm(2));
    jit.tilestored(jit.ptr[rsi + rax * 1], Tmm(0));
    jit.tilerelease();
    TileConfig config;
    config.shape(0, s.m, 4 * s.n).shape(1, s.m, 4 * s.k).shape(2, s.k, 4 * s.n);
    Random random(s.m * 256 + s.n * 16 + s.k);
    std::vector<std::int32_t> c(16 * 16);
    for (auto& x : c) x = static_cast<std::int32_t>(random.next());
    c[0] = 0x7FFFFFF0;  // wraps around
    const std::vector<std::uint8_t> a = random_bytes(random, 1024), b = random_bytes(random, 1024);
    std::vector<std::int32_t> expected =
        dot_product_reference<kSignedA, kSignedB>(c, a, b, s.m, s.n, s.k);
    jit.run(&config, c.data(), const_cast<std::uint8_t*>(a.data()),
            const_cast<std::uint8_t*>(b.data()));
    EXPECT_EQ(c, expected) << name << " m=" << s.m << " n=" << s.n << " k=" << s.k;
  }
}

TEST_F(AmxTest, Int8DotProducts) {
  check_int8_dot_product<true, true>("tdpbssd", &Xbyak::CodeGenerator::tdpbssd);
  check_int8_dot_product<true, false>("tdpbsud", &Xbyak::CodeGenerator::tdpbsud);
  check_int8_dot_product<false, true>("tdpbusd", &Xbyak::CodeGenerator::tdpbusd);
  check_int8_dot_product<false, false>("tdpbuud", &Xbyak::CodeGenerator::tdpbuud);
}

// SDM pseudo-code: per row, even and odd bf16 products summed over k separately (FMA,
// DAZ, FTZ, RNE), then C += even + odd.
TEST_F(AmxTest, Bf16DotProduct) {
  const unsigned m = 5, n = 7, k = 6;
  using namespace reg;
  Jit jit;
  jit.ldtilecfg(jit.ptr[rdi]);
  jit.mov(rax, 64);
  jit.tileloadd(Tmm(3), jit.ptr[rsi + rax * 1]);
  jit.tileloadd(Tmm(4), jit.ptr[rdx + rax * 1]);
  jit.tileloadd(Tmm(6), jit.ptr[rcx + rax * 1]);
  jit.tdpbf16ps(Tmm(3), Tmm(4), Tmm(6));
  jit.tilestored(jit.ptr[rsi + rax * 1], Tmm(3));
  jit.tilerelease();
  TileConfig config;
  config.shape(3, m, 4 * n).shape(4, m, 4 * k).shape(6, k, 4 * n);
  Random random(77);
  std::vector<float> c(256);
  for (auto& x : c) x = random.uniform(-10, 10);
  std::vector<std::uint16_t> a(512), b(512);
  for (auto& x : a) x = static_cast<std::uint16_t>(bits(random.uniform(-4, 4)) >> 16);
  for (auto& x : b) x = static_cast<std::uint16_t>(bits(random.uniform(-4, 4)) >> 16);
  a[3] = 0x0012;  // a bf16 denormal: read as zero
  auto bf16 = [](std::uint16_t v) { return flush_denormal(from_bits(std::uint32_t{v} << 16)); };
  std::vector<float> expected = c;
  for (unsigned i = 0; i < m; ++i) {
    float partial[32] = {};
    for (unsigned kk = 0; kk < k; ++kk)
      for (unsigned j = 0; j < n; ++j)
        for (unsigned h = 0; h < 2; ++h) {
          float& sum = partial[2 * j + h];
          sum = flush_denormal(
              std::fma(bf16(a[i * 32 + 2 * kk + h]), bf16(b[kk * 32 + 2 * j + h]), sum));
        }
    for (unsigned j = 0; j < n; ++j)
      expected[i * 16 + j] = flush_denormal(flush_denormal(c[i * 16 + j]) +
                                            flush_denormal(partial[2 * j] + partial[2 * j + 1]));
  }
  jit.run(&config, c.data(), a.data(), b.data());
  for (unsigned i = 0; i < 256; ++i) EXPECT_EQ(bits(c[i]), bits(expected[i])) << "element " << i;
}

// C (M x N, int32) = A (M x K, u8, row-major) * W^T (W: N x K, s8) with 2 x 2 C tiles,
// A tiles of 16 x 64 bytes and B tiles of W packed 4 k per dword (VNNI order):
//   B_packed[n_block][k_tile][k4 = 0..15][n = 0..15][4]
// A K loop (native code) runs the tile instructions.
struct Gemm {
  unsigned m, n = 32, k;
};

void run_gemm(const Gemm& g) {
  using namespace reg;
  const unsigned k_tiles = g.k / 64;
  Random random(g.m * 7 + g.k);
  const std::vector<std::uint8_t> a = random_bytes(random, std::size_t{g.m} * g.k);
  std::vector<std::int8_t> w(std::size_t{g.n} * g.k);
  for (auto& x : w) x = static_cast<std::int8_t>(random.next());
  std::vector<std::int8_t> packed(std::size_t{g.n} * g.k);
  for (unsigned nb = 0; nb < g.n / 16; ++nb)
    for (unsigned kt = 0; kt < k_tiles; ++kt)
      for (unsigned k4 = 0; k4 < 16; ++k4)
        for (unsigned col = 0; col < 16; ++col)
          for (unsigned q = 0; q < 4; ++q)
            packed[((nb * k_tiles + kt) * 16 + k4) * 64 + col * 4 + q] =
                w[(nb * 16 + col) * g.k + kt * 64 + k4 * 4 + q];

  TileConfig config;
  const unsigned upper_rows = g.m > 16 ? 16 : g.m, lower_rows = g.m > 16 ? g.m - 16 : 1;
  config.shape(0, upper_rows, 64)
      .shape(1, upper_rows, 64)
      .shape(2, lower_rows, 64)
      .shape(3, lower_rows, 64);
  config.shape(4, upper_rows, 64).shape(5, lower_rows, 64).shape(6, 16, 64).shape(7, 16, 64);

  // rdi config, rsi A, rdx packed B, rcx C; r8 = K (A stride), r9 = 64, r10 = k tiles left.
  Jit jit;
  Xbyak::Label k_loop;
  jit.ldtilecfg(jit.ptr[rdi]);
  jit.mov(r8, g.k);
  jit.mov(r9, 64);
  jit.mov(r10, k_tiles);
  jit.mov(r11, std::uint64_t{k_tiles} * 1024);  // B stride between the two column blocks
  for (int t = 0; t < 4; ++t) jit.tilezero(Tmm(t));
  jit.L(k_loop);
  jit.tileloadd(Tmm(4), jit.ptr[rsi + r8 * 1]);
  jit.mov(rax, rsi);
  jit.imul(rax, r8, 16);
  jit.add(rax, rsi);
  jit.tileloadd(Tmm(5), jit.ptr[rax + r8 * 1]);
  jit.tileloadd(Tmm(6), jit.ptr[rdx + r9 * 1]);
  jit.lea(rax, jit.ptr[rdx + r11]);
  jit.tileloadd(Tmm(7), jit.ptr[rax + r9 * 1]);
  jit.tdpbusd(Tmm(0), Tmm(4), Tmm(6));
  jit.tdpbusd(Tmm(1), Tmm(4), Tmm(7));
  jit.tdpbusd(Tmm(2), Tmm(5), Tmm(6));
  jit.tdpbusd(Tmm(3), Tmm(5), Tmm(7));
  jit.add(rsi, 64);
  jit.add(rdx, 1024);
  jit.dec(r10);
  jit.jnz(k_loop);
  jit.mov(rax, 128);  // C row stride: 32 int32
  jit.tilestored(jit.ptr[rcx + rax * 1], Tmm(0));
  jit.tilestored(jit.ptr[rcx + 64 + rax * 1], Tmm(1));
  jit.tilestored(jit.ptr[rcx + 16 * 128 + rax * 1], Tmm(2));
  jit.tilestored(jit.ptr[rcx + 16 * 128 + 64 + rax * 1], Tmm(3));
  jit.tilerelease();

  std::vector<std::int32_t> c(32 * 32, 0x5A5A5A5A);
  jit.run(&config, const_cast<std::uint8_t*>(a.data()), packed.data(), c.data());
  for (unsigned i = 0; i < g.m; ++i)
    for (unsigned j = 0; j < g.n; ++j) {
      std::int32_t expected = 0;
      for (unsigned kk = 0; kk < g.k; ++kk) expected += a[i * g.k + kk] * w[j * g.k + kk];
      ASSERT_EQ(c[i * 32 + j], expected)
          << "C[" << i << "][" << j << "] of " << g.m << "x" << g.n << "x" << g.k;
    }
}

TEST_F(AmxTest, TiledGemmMatchesScalarMatmul) {
  run_gemm({32, 32, 192});
  run_gemm({29, 32, 256});
  run_gemm({17, 32, 64});
}

// Threads run tile programs at once, each with its own shapes and data; none sees
// another's configuration or tiles.
TEST_F(AmxTest, TileStateIsPerThread) {
  using namespace reg;
  Jit jit;  // rdi config, rsi A (stride 64), rdx B, rcx C: loops 200 times over ldtilecfg..store
  Xbyak::Label again;
  jit.mov(r10, 200);
  jit.L(again);
  jit.ldtilecfg(jit.ptr[rdi]);
  jit.mov(rax, 64);
  jit.tilezero(Tmm(0));
  jit.tileloadd(Tmm(1), jit.ptr[rsi + rax * 1]);
  jit.tileloadd(Tmm(2), jit.ptr[rdx + rax * 1]);
  jit.tdpbusd(Tmm(0), Tmm(1), Tmm(2));
  jit.tilestored(jit.ptr[rcx + rax * 1], Tmm(0));
  jit.tilerelease();
  jit.dec(r10);
  jit.jnz(again);
  jit.finalize();
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const unsigned m = 3 + 4 * t, n = 16 - 3 * t, k = 2 + 3 * t;
      TileConfig config;
      config.shape(0, m, 4 * n).shape(1, m, 4 * k).shape(2, k, 4 * n);
      Random random(100 + t);
      const std::vector<std::uint8_t> a = random_bytes(random, 1024),
                                      b = random_bytes(random, 1024);
      std::vector<std::int32_t> c(256, 0), zero(256, 0);
      const std::vector<std::int32_t> expected =
          dot_product_reference<false, true>(zero, a, b, m, n, k);
      for (int round = 0; round < 5; ++round) {
        std::fill(c.begin(), c.end(), 0);
        jit.run(&config, const_cast<std::uint8_t*>(a.data()), const_cast<std::uint8_t*>(b.data()),
                c.data());
        if (c != expected) ++failures[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

// Shapes the hardware rejects reach the SIGILL handler underneath the emulator.
TEST_F(AmxTest, WrongShapesRaiseUndefinedOpcode) {
  using namespace reg;
  const unsigned amx = emulated() & kAmx;
  auto dot_with = [&](const TileConfig& config) {
    Jit jit;
    jit.ldtilecfg(jit.ptr[rdi]);
    jit.tdpbusd(Tmm(0), Tmm(1), Tmm(2));
    jit.tilerelease();
    return passes_sigill_on(amx, [&] { jit.run(const_cast<TileConfig*>(&config)); });
  };
  TileConfig good;
  good.shape(0, 4, 32).shape(1, 4, 12).shape(2, 3, 32);
  EXPECT_FALSE(dot_with(good)) << "a consistent shape";
  TileConfig wrong_k = good;
  wrong_k.shape(2, 4, 32);
  EXPECT_TRUE(dot_with(wrong_k)) << "B.rows != A.colsb / 4";
  TileConfig wrong_m = good;
  wrong_m.shape(1, 5, 12);
  EXPECT_TRUE(dot_with(wrong_m)) << "A.rows != C.rows";
  TileConfig wrong_n = good;
  wrong_n.shape(2, 3, 28);
  EXPECT_TRUE(dot_with(wrong_n)) << "B.colsb != C.colsb";
  TileConfig unused_tile = good;
  unused_tile.shape(2, 0, 0);
  EXPECT_TRUE(dot_with(unused_tile)) << "B not configured";

  Jit same_tile;
  same_tile.ldtilecfg(same_tile.ptr[rdi]);
  same_tile.tdpbusd(Tmm(0), Tmm(0), Tmm(2));
  EXPECT_TRUE(passes_sigill_on(amx, [&] { same_tile.run(&good); })) << "C == A";

  Jit unconfigured;
  unconfigured.tilerelease();
  unconfigured.tilezero(Tmm(0));
  EXPECT_TRUE(passes_sigill_on(amx, [&] { unconfigured.run(); })) << "tiles not configured";

  if (!amx) return;  // on AMX hardware an invalid configuration is a #GP (SIGSEGV)
  Jit load;
  load.ldtilecfg(load.ptr[rdi]);
  load.tilerelease();
  TileConfig bad_palette = good;
  bad_palette.palette = 2;
  EXPECT_TRUE(passes_sigill_on(amx, [&] { load.run(&bad_palette); })) << "palette 2";
  TileConfig too_many_rows = good;
  too_many_rows.shape(3, 17, 4);
  EXPECT_TRUE(passes_sigill_on(amx, [&] { load.run(&too_many_rows); })) << "17 rows";
  TileConfig half_shape = good;
  half_shape.shape(3, 2, 0);
  EXPECT_TRUE(passes_sigill_on(amx, [&] { load.run(&half_shape); })) << "rows without colsb";
  TileConfig reserved = good;
  reserved.reserved[3] = 1;
  EXPECT_TRUE(passes_sigill_on(amx, [&] { load.run(&reserved); })) << "reserved byte set";
}

}  // namespace
}  // namespace qforge::emulate::test
