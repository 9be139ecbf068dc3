// Conversions: int32 <-> float (MXCSR and embedded rounding, out-of-range results),
// fp16 <-> float (every rounding imm8, NaN payloads, denormals), float -> bf16 and the
// bf16 dot product, against the SDM definitions and, where F16C/AVX have them, against
// the native instructions.
#include <xmmintrin.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tests/emulate/emulate_harness.h"
#include "tests/emulate/float_inputs.h"

namespace qforge::emulate::test {
namespace {

using std::int32_t, std::uint16_t, std::uint32_t;
using Xbyak::CodeGenerator;
namespace reg = Xbyak::util;

class ConvertTest : public EmulatorTest {};

void check(const VectorOp& op, bool native) {
  SCOPED_TRACE(op.name);
  check_vector_op(op);
  if (native) check_against_native(op);
}

int fe_mode(unsigned rounding) {
  const int modes[] = {FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO};
  return modes[rounding & 3];
}

VectorOp int_to_float() {
  VectorOp op;
  op.name = "vcvtdq2ps";
  op.element_bytes = op.broadcast_bytes = 4;
  op.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vcvtdq2ps(o.dst(vl), o.src2(vl));
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    return map1<int32_t>(in.src2, vl, [](int32_t x) {
      const float f = static_cast<float>(x);
      std::uint32_t b;
      std::memcpy(&b, &f, 4);
      return static_cast<int32_t>(b);
    });
  };
  return op;
}

// cvtps2dq / cvttps2dq: NaN and values outside int32 after rounding give 0x80000000.
int32_t float_to_int(float x, bool truncate) {
  if (is_nan(x)) return std::numeric_limits<int32_t>::min();
  const double r =
      truncate ? std::trunc(static_cast<double>(x)) : std::nearbyint(static_cast<double>(x));
  if (r < -2147483648.0 || r > 2147483647.0) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(r);
}

VectorOp float_to_int_op(bool truncate) {
  VectorOp op;
  op.name = truncate ? "vcvttps2dq" : "vcvtps2dq";
  op.element_bytes = op.broadcast_bytes = 4;
  op.inputs = [](Random& random) {
    Inputs in = float_inputs(random);
    for (unsigned i = 0; i < 16; i += 4) in.src2.set<float>(i, random.uniform(-3e9f, 3e9f));
    for (unsigned i = 1; i < 16; i += 4)
      in.src2.set<float>(i, std::round(random.uniform(-50, 50)) + 0.5f);
    return in;
  };
  op.emit = [truncate](CodeGenerator& g, const Operands& o, unsigned vl) {
    if (truncate) {
      g.vcvttps2dq(o.dst(vl), o.src2(vl));
    } else {
      g.vcvtps2dq(o.dst(vl), o.src2(vl));
    }
  };
  op.reference = [truncate](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i)
      r.set<int32_t>(i, float_to_int(in.src2.get<float>(i), truncate));
    return r;
  };
  return op;
}

TEST_F(ConvertTest, IntegerFloatConversionsInEveryMxcsrRounding) {
  for (unsigned rounding = 0; rounding < 4; ++rounding) {
    ScopedRounding scope(fe_mode(rounding));
    SCOPED_TRACE("MXCSR.RC " + std::to_string(rounding));
    check(int_to_float(), true);
    check(float_to_int_op(false), true);
    check(float_to_int_op(true), true);
  }
}

TEST_F(ConvertTest, EmbeddedRoundingOverridesMxcsr) {
  const Xbyak::EvexModifierRounding modes[] = {reg::T_rn_sae, reg::T_rd_sae, reg::T_ru_sae,
                                               reg::T_rz_sae};
  for (unsigned rounding = 0; rounding < 4; ++rounding) {
    VectorOp op = float_to_int_op(false);
    op.name += " {er} " + std::to_string(rounding);
    op.lengths = {64};
    op.memory_form = false;
    op.broadcast_bytes = 0;
    const auto mode = modes[rounding];
    op.emit = [mode](CodeGenerator& g, const Operands& o, unsigned) {
      g.vcvtps2dq(o.dst(64) | mode, o.src2(64));
    };
    const auto reference = op.reference;
    op.reference = [reference, rounding](const Inputs& in, unsigned vl) {
      ScopedRounding scope(fe_mode(rounding));
      return reference(in, vl);
    };
    ScopedRounding guest(FE_UPWARD);  // MXCSR says otherwise: the embedded rounding wins
    check_vector_op(op);
  }
}

float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0x1F) {
    if (mantissa == 0) return sign * INFINITY;
    return from_bits(((h & 0x8000u) << 16) | 0x7FC00000u | (static_cast<uint32_t>(mantissa) << 13));
  }
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

// float -> fp16: the exact value rounded to the fp16 grid in `rounding` (computed in
// double, where every float and every fp16 midpoint is exact).
uint16_t float_to_half(float x, unsigned rounding) {
  const uint16_t sign = (bits(x) >> 16) & 0x8000;
  if (is_nan(x)) return sign | 0x7E00 | ((bits(x) >> 13) & 0x3FF);
  if (std::isinf(x)) return sign | 0x7C00;
  const double magnitude = std::fabs(static_cast<double>(x));
  int exponent = magnitude == 0 ? -24 : std::ilogb(magnitude);
  const int quantum = exponent < -14 ? -24 : exponent - 10;
  double units = std::ldexp(magnitude, -quantum);  // exact
  const bool negative = sign != 0;
  const double floor_units = std::floor(units), fraction = units - floor_units;
  bool up = false;
  switch (rounding) {
    case 0:
      up = fraction > 0.5 || (fraction == 0.5 && std::fmod(floor_units, 2) == 1);
      break;
    case 1:
      up = negative && fraction > 0;
      break;
    case 2:
      up = !negative && fraction > 0;
      break;
    default:
      break;
  }
  const double value = std::ldexp(floor_units + (up ? 1 : 0), quantum);
  if (value > 65504.0) {
    const bool to_infinity =
        rounding == 0 || (rounding == 1 && negative) || (rounding == 2 && !negative);
    return sign | (to_infinity ? 0x7C00 : 0x7BFF);
  }
  if (value == 0) return sign;
  exponent = std::ilogb(value);
  if (exponent < -14) return sign | static_cast<uint16_t>(std::ldexp(value, 24));
  const auto mantissa = static_cast<uint16_t>(std::ldexp(value, 10 - exponent) - 1024);
  return sign | static_cast<uint16_t>((exponent + 15) << 10) | mantissa;
}

TEST_F(ConvertTest, HalfToFloat) {
  VectorOp op;
  op.name = "vcvtph2ps";
  op.element_bytes = 4;
  op.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vcvtph2ps(o.dst(vl), o.src2(vl / 2));
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i) r.set<float>(i, half_to_float(in.src2.get<uint16_t>(i)));
    return r;
  };
  check(op, true);
}

Inputs half_range_inputs(Random& random) {
  Inputs in = float_inputs(random);
  for (unsigned i = 0; i < 16; ++i) {
    switch (random.next() % 4) {
      case 0:
        in.src1.set<float>(i, random.uniform(-70000, 70000));
        break;
      case 1:
        in.src1.set<float>(
            i, std::ldexp(random.uniform(-1, 1), -14 - static_cast<int>(random.next() % 12)));
        break;
      case 2:
        in.src1.set<float>(i, random.uniform(-2, 2));
        break;
      default:
        break;
    }
  }
  return in;
}

TEST_F(ConvertTest, FloatToHalfInEveryRounding) {
  for (std::uint8_t imm : {0, 1, 2, 3, 4}) {
    for (unsigned guest_rounding : {0u, 3u}) {
      if (imm != 4 && guest_rounding != 0) continue;
      ScopedRounding scope(fe_mode(guest_rounding));
      const unsigned rounding = imm == 4 ? guest_rounding : imm;
      VectorOp op;
      op.name =
          "vcvtps2ph imm " + std::to_string(imm) + " MXCSR.RC " + std::to_string(guest_rounding);
      op.element_bytes = 2;
      op.memory_form = false;
      op.inputs = half_range_inputs;
      op.result_bytes = [](unsigned vl) { return vl / 2; };
      op.emit = [imm](CodeGenerator& g, const Operands& o, unsigned vl) {
        g.vcvtps2ph(o.dst(vl / 2 < 16 ? 16 : vl / 2), o.src1(vl), imm);
      };
      op.reference = [rounding](const Inputs& in, unsigned vl) {
        Vec512 r;
        for (unsigned i = 0; i < vl / 4; ++i)
          r.set<uint16_t>(i, float_to_half(in.src1.get<float>(i), rounding));
        return r;
      };
      check(op, true);
    }
  }
  // To memory under a mask.
  Jit jit;
  jit.vmovups(reg::zmm17, jit.ptr[reg::rdi]);
  jit.kmovq(reg::k1, jit.ptr[reg::rdi + 64]);
  jit.vcvtps2ph(jit.ptr[reg::rsi] | reg::k1, reg::zmm17, 0);
  Random random(3);
  alignas(64) Vec512 input[2] = {half_range_inputs(random).src1, random.bytes()};
  alignas(64) Vec512 memory = random.bytes();
  Vec512 expected = memory;
  for (unsigned i = 0; i < 16; ++i)
    if ((input[1].bytes[i / 8] >> (i % 8)) & 1)
      expected.set<uint16_t>(i, float_to_half(input[0].get<float>(i), 0));
  jit.run(input, &memory);
  EXPECT_EQ(hex(memory, 64, 2), hex(expected, 64, 2)) << "vcvtps2ph m256{k1}, zmm";
}

// SDM convert_fp32_to_bfloat16: zero/denormal -> signed zero, NaN -> quiet, else RNE.
uint16_t float_to_bf16(float x) {
  const uint32_t b = bits(x);
  if (is_nan(x)) return static_cast<uint16_t>((b >> 16) | 0x40);
  if ((b & 0x7F800000u) == 0) return static_cast<uint16_t>((b >> 16) & 0x8000);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

Inputs bf16_inputs(Random& random) {
  Inputs in = float_inputs(random);
  for (Vec512* v : {&in.src1, &in.src2})
    for (unsigned i = 0; i < 16; ++i)
      if (random.next() % 6 == 0)
        v->set<uint32_t>(i, (v->get<uint32_t>(i) & 0xFFFF0000u) | 0x8000u);  // ties
  return in;
}

TEST_F(ConvertTest, FloatToBf16) {
  VectorOp one;
  one.name = "vcvtneps2bf16";
  one.element_bytes = 2;
  one.broadcast_bytes = 4;
  one.inputs = bf16_inputs;
  one.result_bytes = [](unsigned vl) { return vl / 2; };
  one.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vcvtneps2bf16(o.dst(vl / 2 < 16 ? 16 : vl / 2), o.src2_sized(vl));
  };
  one.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i) r.set<uint16_t>(i, float_to_bf16(in.src2.get<float>(i)));
    return r;
  };
  check(one, false);

  VectorOp two;
  two.name = "vcvtne2ps2bf16";
  two.element_bytes = 2;
  two.broadcast_bytes = 4;
  two.inputs = bf16_inputs;
  two.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vcvtne2ps2bf16(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  two.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    const unsigned n = vl / 4;
    for (unsigned i = 0; i < n; ++i) {
      r.set<uint16_t>(i, float_to_bf16(in.src2.get<float>(i)));
      r.set<uint16_t>(n + i, float_to_bf16(in.src1.get<float>(i)));
    }
    return r;
  };
  check(two, false);
}

// dword i += a.bf16[2i+1] * b.bf16[2i+1], then += a.bf16[2i] * b.bf16[2i]: each an FMA
// with denormal inputs as zero, denormal results flushed, round to nearest even.
TEST_F(ConvertTest, Bf16DotProduct) {
  VectorOp op;
  op.name = "vdpbf16ps";
  op.element_bytes = op.broadcast_bytes = 4;
  op.inputs = [](Random& random) {
    Inputs in = float_inputs(random);
    for (unsigned i = 0; i < 32; i += 7) {
      in.src1.set<uint16_t>(i, static_cast<uint16_t>(random.next() & 0x807F));  // bf16 denormals
      in.src2.set<uint16_t>(i + 1, 0x0080);                                     // tiny products
    }
    return in;
  };
  op.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vdpbf16ps(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    auto bf16 = [](uint16_t b) { return flush_denormal(from_bits(uint32_t{b} << 16)); };
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i) {
      float sum = flush_denormal(in.dst.get<float>(i));
      for (int half = 1; half >= 0; --half) {
        const float a = bf16(in.src1.get<uint16_t>(2 * i + half));
        const float b = bf16(in.src2.get<uint16_t>(2 * i + half));
        sum = flush_denormal(std::fma(a, b, sum));
      }
      r.set<float>(i, sum);
    }
    return r;
  };
  check(op, false);
}

}  // namespace
}  // namespace qforge::emulate::test
