// Vector math for epilogues: SiLU through a Cephes-style expf, exact round-half-away,
// and the kernel's constant table (one vector per constant, after the code).
#include <cstring>

#include "jit/gemm/gemm_generator.h"

namespace qforge {

using namespace Xbyak;
using namespace Xbyak::util;

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

// round half away from zero, exactly: t = trunc(y); y = t + trunc(2 * (y - t)).
// (y - t is exact; trunc(2f) is -1, 0 or 1 with the sign of y.)
void GemmGenerator::emit_round_half_away(const Xmm& y, const Xmm& t) {
  constexpr int kTruncate = 3;
  if (zmm_) {
    vrndscaleps(t, y, kTruncate);
    vsubps(y, y, t);
    vaddps(y, y, y);
    vrndscaleps(y, y, kTruncate);
  } else {
    vroundps(t, y, kTruncate);
    vsubps(y, y, t);
    vaddps(y, y, y);
    vroundps(y, y, kTruncate);
  }
  vaddps(y, y, t);
}

// y = y / (1 + exp(-y)).  exp(x) = 2^n * e^r, n = round(x log2 e), r = x - n ln2 (in two
// parts), e^r by a degree-7 polynomial; x is clamped to [-87, 88] so 2^n stays normal.
void GemmGenerator::emit_silu(const Xmm& y, int first_temp) {
  const Xmm x = epilogue_temp(first_temp), n = epilogue_temp(first_temp + 1);
  const Xmm p = epilogue_temp(first_temp + 2), x2 = epilogue_temp(first_temp + 3);
  constexpr int kNearest = 0;
  vxorps(x, x, x);
  vsubps(x, x, y);
  vmaxps(x, x, constant(kConstExpLo));
  vminps(x, x, constant(kConstExpHi));
  vmulps(n, x, constant(kConstLog2e));
  if (zmm_)
    vrndscaleps(n, n, kNearest);
  else
    vroundps(n, n, kNearest);
  vfnmadd231ps(x, n, constant(kConstLn2Hi));
  vfnmadd231ps(x, n, constant(kConstLn2Lo));
  vmovups(p, constant(kConstExpP0));
  vfmadd213ps(p, x, constant(kConstExpP1));
  vfmadd213ps(p, x, constant(kConstExpP2));
  vfmadd213ps(p, x, constant(kConstExpP3));
  vfmadd213ps(p, x, constant(kConstExpP4));
  vfmadd213ps(p, x, constant(kConstExpP5));
  vmulps(x2, x, x);
  vfmadd213ps(p, x2, x);  // p * x^2 + x
  vaddps(p, p, constant(kConstOne));
  vcvtps2dq(n, n);
  vpaddd(n, n, constant(kConstExponentBias));
  vpslld(n, n, 23);  // 2^n as float bits
  vmulps(p, p, n);
  vaddps(p, p, constant(kConstOne));
  vdivps(y, y, p);
}

void GemmGenerator::emit_constants() {
  const int lanes = vector_bytes_ / 4;
  auto splat = [&](std::uint32_t value) {
    for (int i = 0; i < lanes; ++i) dd(value);
  };
  align(64);
  L(constants_);
  splat(0x00010001u);                       // kConstOnes16
  splat(0x0f0f0f0fu);                       // kConstNibbleMask
  splat(bits_of(0.5f));                     // kConstHalf
  splat(bits_of(-87.0f));                   // kConstExpLo
  splat(bits_of(88.0f));                    // kConstExpHi
  splat(bits_of(1.44269504088896341f));     // kConstLog2e
  splat(bits_of(0.693359375f));             // kConstLn2Hi
  splat(bits_of(-2.12194440e-4f));          // kConstLn2Lo
  splat(bits_of(1.9875691500e-4f));         // kConstExpP0
  splat(bits_of(1.3981999507e-3f));         // kConstExpP1
  splat(bits_of(8.3334519073e-3f));         // kConstExpP2
  splat(bits_of(4.1665795894e-2f));         // kConstExpP3
  splat(bits_of(1.6666665459e-1f));         // kConstExpP4
  splat(bits_of(5.0000001201e-1f));         // kConstExpP5
  splat(bits_of(1.0f));                     // kConstOne
  splat(127u);                              // kConstExponentBias
  splat(0u);                                // kConstZero
  splat(bits_of(255.0f));                   // kConst255
  splat(0x80808080u);                       // kConstByteSign
  for (int j = 0; j < kWoqFieldMasks; ++j)  // kConstFieldMasks
    splat(key_.bits == 8 ? (j < 3 ? 0xffu << (8 * j) : 0u) : 0xfu << (4 * j));
  splat(bits_of(float(woq_operand_bias())));        // kConstOperandBias
  for (int i = 0; i < lanes; ++i) dd(0xffffffffu);  // kConstLaneMasks: -1 x lanes,
  for (int i = 0; i < lanes; ++i) dd(0u);           //                  0 x lanes
  if (bf16_) {  // kConstBf16Nibbles: the operand less the layout's bias, exact in bf16
    const int bias = key_.asymmetric ? 0 : 8;
    for (int i = 0; i < 32; ++i) dw(bits_of(float((i & 15) - bias)) >> 16);
  }
  if (key_.bits == 5) {  // kConstFifthBit: 0x10, the bit spread, the bit select
    splat(0x10101010u);
    for (int j = 0; j < vector_bytes_; ++j) db(static_cast<std::uint8_t>(j / 8));
    for (int j = 0; j < vector_bytes_; ++j) db(static_cast<std::uint8_t>(1u << (j % 8)));
  }
}

}  // namespace qforge
