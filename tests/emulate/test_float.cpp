// EVEX float ALU against IEEE-754 references (computed by this CPU's own scalar SSE in
// the test) and, where AVX2 has the instruction, against the native VEX instruction:
// arithmetic with NaN propagation, FMA (12 forms), min/max, sqrt, embedded and MXCSR
// rounding, DAZ/FTZ, rndscale/reduce/scalef, rcp14/rsqrt14 accuracy, logic, vcmpps (all
// 32 predicates), vblendmps, and the scalar ss/sd forms.
#include <cpuid.h>
#include <xmmintrin.h>

#include <cfenv>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "jit/emulate/emulator.h"
#include "tests/emulate/emulate_harness.h"
#include "tests/emulate/float_inputs.h"

namespace qforge::emulate::test {
namespace {

using Xbyak::CodeGenerator;
using Xbyak::Operand;
using Xbyak::Xmm;
namespace reg = Xbyak::util;

// dst, src1, src2 for Xbyak mnemonics of either signature (Xmm or Operand src1).
using Emit3 = void (*)(CodeGenerator&, const Xmm&, const Xmm&, const Operand&);
template <auto kMnemonic>
void emit3(CodeGenerator& g, const Xmm& dst, const Xmm& src1, const Operand& src2) {
  (g.*kMnemonic)(dst, src1, src2);
}
using SqrtScalar = void (CodeGenerator::*)(const Xmm&, const Xmm&, const Operand&);

class FloatTest : public EmulatorTest {};

void check(const VectorOp& op, bool native) {
  SCOPED_TRACE(op.name);
  check_vector_op(op);
  if (native) check_against_native(op);
}

// IEEE operation with x86 NaN propagation: the first NaN operand, quieted.
template <typename Fn>
float propagate(float a, float b, Fn fn) {
  if (is_nan(a)) return quiet(a);
  if (is_nan(b)) return quiet(b);
  return fn(a, b);
}

template <typename Fn>
VectorOp float_binary(const char* name, Emit3 emit, Fn fn) {
  VectorOp op;
  op.name = name;
  op.element_bytes = op.broadcast_bytes = 4;
  op.inputs = [](Random& r) { return float_inputs(r); };
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    emit(g, o.dst(vl), o.src1(vl), o.src2(vl));
  };
  op.reference = [fn](const Inputs& in, unsigned vl) {
    return map2<float>(in.src1, in.src2, vl, fn);
  };
  return op;
}

TEST_F(FloatTest, Arithmetic) {
  check(float_binary("vaddps", emit3<&CodeGenerator::vaddps>,
                     [](float a, float b) {
                       return propagate(a, b, [](float x, float y) { return x + y; });
                     }),
        true);
  check(float_binary("vsubps", emit3<&CodeGenerator::vsubps>,
                     [](float a, float b) {
                       return propagate(a, b, [](float x, float y) { return x - y; });
                     }),
        true);
  check(float_binary("vmulps", emit3<&CodeGenerator::vmulps>,
                     [](float a, float b) {
                       return propagate(a, b, [](float x, float y) { return x * y; });
                     }),
        true);
  check(float_binary("vdivps", emit3<&CodeGenerator::vdivps>,
                     [](float a, float b) {
                       return propagate(a, b, [](float x, float y) { return x / y; });
                     }),
        true);
  // Either NaN or both zero: the second source.
  check(float_binary("vmaxps", emit3<&CodeGenerator::vmaxps>,
                     [](float a, float b) { return a > b ? a : b; }),
        true);
  check(float_binary("vminps", emit3<&CodeGenerator::vminps>,
                     [](float a, float b) { return a < b ? a : b; }),
        true);
  VectorOp sqrt = float_binary("vsqrtps", nullptr, [](float, float) { return 0.0f; });
  sqrt.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vsqrtps(o.dst(vl), o.src2(vl));
  };
  sqrt.reference = [](const Inputs& in, unsigned vl) {
    return map1<float>(in.src2, vl, [](float x) { return is_nan(x) ? quiet(x) : std::sqrt(x); });
  };
  check(sqrt, true);
}

// The 12 FMA forms: which operands multiply (132/213/231) and which signs flip.
TEST_F(FloatTest, FusedMultiplyAdd) {
  struct Case {
    const char* name;
    Emit3 emit;
    int order;  // 132, 213, 231
    bool negate_product, negate_addend;
  };
  const Case cases[] = {
      {"vfmadd132ps", emit3<&CodeGenerator::vfmadd132ps>, 132, false, false},
      {"vfmadd213ps", emit3<&CodeGenerator::vfmadd213ps>, 213, false, false},
      {"vfmadd231ps", emit3<&CodeGenerator::vfmadd231ps>, 231, false, false},
      {"vfmsub132ps", emit3<&CodeGenerator::vfmsub132ps>, 132, false, true},
      {"vfmsub213ps", emit3<&CodeGenerator::vfmsub213ps>, 213, false, true},
      {"vfmsub231ps", emit3<&CodeGenerator::vfmsub231ps>, 231, false, true},
      {"vfnmadd132ps", emit3<&CodeGenerator::vfnmadd132ps>, 132, true, false},
      {"vfnmadd213ps", emit3<&CodeGenerator::vfnmadd213ps>, 213, true, false},
      {"vfnmadd231ps", emit3<&CodeGenerator::vfnmadd231ps>, 231, true, false},
      {"vfnmsub132ps", emit3<&CodeGenerator::vfnmsub132ps>, 132, true, true},
      {"vfnmsub213ps", emit3<&CodeGenerator::vfnmsub213ps>, 213, true, true},
      {"vfnmsub231ps", emit3<&CodeGenerator::vfnmsub231ps>, 231, true, true},
  };
  for (const Case& c : cases) {
    VectorOp op = float_binary(c.name, c.emit, [](float, float) { return 0.0f; });
    op.reference = [&c](const Inputs& in, unsigned vl) {
      return map3<float>(in.dst, in.src1, in.src2, vl, [&c](float d, float s2, float s3) {
        if (is_nan(d)) return quiet(d);
        if (is_nan(s2)) return quiet(s2);
        if (is_nan(s3)) return quiet(s3);
        float x = s2, y = s3, z = d;  // 231: src2 * src3 + dest
        if (c.order == 132) x = d, y = s3, z = s2;
        if (c.order == 213) x = s2, y = d, z = s3;
        return std::fma(c.negate_product ? -x : x, y, c.negate_addend ? -z : z);
      });
    };
    check(op, true);
  }
}

int fe_mode(unsigned rounding) {
  const int modes[] = {FE_TONEAREST, FE_DOWNWARD, FE_UPWARD, FE_TOWARDZERO};
  return modes[rounding & 3];
}

// {rn,rd,ru,rz}-sae on zmm register forms: the reference rounds the same way.
TEST_F(FloatTest, EmbeddedRounding) {
  const Xbyak::EvexModifierRounding modes[] = {reg::T_rn_sae, reg::T_rd_sae, reg::T_ru_sae,
                                               reg::T_rz_sae};
  for (unsigned rounding = 0; rounding < 4; ++rounding) {
    const auto mode = modes[rounding];
    VectorOp add = float_binary("vaddps {er}", nullptr, [](float, float) { return 0.0f; });
    add.name += " " + std::to_string(rounding);
    add.lengths = {64};
    add.memory_form = false;
    add.broadcast_bytes = 0;
    add.inputs = [](Random& r) { return float_inputs(r, false); };
    add.emit = [mode](CodeGenerator& g, const Operands& o, unsigned) {
      g.vaddps(o.dst(64), o.src1(64), o.src2_register(64) | mode);
    };
    add.reference = [rounding](const Inputs& in, unsigned vl) {
      ScopedRounding scope(fe_mode(rounding));
      return map2<float>(in.src1, in.src2, vl, [](float a, float b) { return a + b; });
    };
    check_vector_op(add);

    VectorOp sqrt = add;
    sqrt.name = "vsqrtps {er} " + std::to_string(rounding);
    sqrt.emit = [mode](CodeGenerator& g, const Operands& o, unsigned) {
      g.vsqrtps(o.dst(64), o.src2_register(64) | mode);
    };
    sqrt.reference = [rounding](const Inputs& in, unsigned vl) {
      ScopedRounding scope(fe_mode(rounding));
      return map1<float>(in.src2, vl, [](float x) { return std::sqrt(std::fabs(x)); });
    };
    sqrt.inputs = [](Random& r) {
      Inputs in = float_inputs(r, false);
      for (unsigned i = 0; i < 16; ++i) in.src2.set<float>(i, std::fabs(in.src2.get<float>(i)));
      return in;
    };
    check_vector_op(sqrt);

    VectorOp div = add;
    div.name = "vdivps {er} " + std::to_string(rounding);
    div.emit = [mode](CodeGenerator& g, const Operands& o, unsigned) {
      g.vdivps(o.dst(64), o.src1(64), o.src2_register(64) | mode);
    };
    div.reference = [rounding](const Inputs& in, unsigned vl) {
      ScopedRounding scope(fe_mode(rounding));
      return map2<float>(in.src1, in.src2, vl, [](float a, float b) { return a / b; });
    };
    check_vector_op(div);
  }
}

// The interrupted code's MXCSR rounding applies to emulated instructions.
TEST_F(FloatTest, GuestMxcsrRoundingApplies) {
  for (unsigned rounding = 0; rounding < 4; ++rounding) {
    VectorOp mul = float_binary("vmulps with MXCSR.RC", emit3<&CodeGenerator::vmulps>,
                                [](float, float) { return 0.0f; });
    mul.inputs = [](Random& r) { return float_inputs(r, false); };
    mul.reference = [](const Inputs& in, unsigned vl) {
      return map2<float>(in.src1, in.src2, vl, [](float a, float b) { return a * b; });
    };
    ScopedRounding scope(fe_mode(rounding));
    SCOPED_TRACE(rounding);
    check_vector_op(mul);
  }
}

// MXCSR.DAZ and FTZ of the interrupted code apply (as for the native instruction).
TEST_F(FloatTest, DenormalsAreZeroAndFlushToZero) {
  VectorOp mul = float_binary("vmulps DAZ+FTZ", emit3<&CodeGenerator::vmulps>,
                              [](float, float) { return 0.0f; });
  mul.inputs = [](Random& random) {
    Inputs in = float_inputs(random);
    for (unsigned i = 0; i < 16; i += 3) {
      in.src1.set<float>(i, 0x1p-70f * random.uniform(1, 2));  // products underflow
      in.src2.set<float>(i, 0x1p-70f * random.uniform(-2, 2));
    }
    return in;
  };
  mul.reference = [](const Inputs& in, unsigned vl) {
    return map2<float>(in.src1, in.src2, vl, [](float a, float b) {
      return propagate(flush_denormal(a), flush_denormal(b),
                       [](float x, float y) { return flush_denormal(x * y); });
    });
  };
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040);  // FTZ | DAZ
  check_vector_op(mul);
  check_against_native(mul);
  _mm_setcsr(saved);
}

// The zero vreduceps gives for an infinite source when rounding down: -0 as Intel's SDM
// writes it (and the emulator follows), +0 on AMD's hardware (measured on family 26),
// which is what the test compares with where AVX-512 runs natively on such a CPU.
bool amd_cpu() {
  unsigned max_leaf = 0, b = 0, c = 0, d = 0;
  __get_cpuid(0, &max_leaf, &b, &c, &d);
  char vendor[12];
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
}

float reduced_infinity_rounding_down() {
  const bool native_amd = (native_features() & Feature::kAvx512) && amd_cpu();
  return native_amd ? 0.0f : -0.0f;
}

// 2^-M * round(2^M * x) with imm8: [7:4] M, [2] use MXCSR.RC, [1:0] RC.
float round_scaled(float x, std::uint8_t imm, bool reduce) {
  if (is_nan(x)) return quiet(x);
  const unsigned rounding = (imm & 4) ? 0 : (imm & 3);
  if (std::isinf(x)) return reduce ? (rounding == 1 ? reduced_infinity_rounding_down() : 0.0f) : x;
  ScopedRounding scope(fe_mode(rounding));
  const double scale = std::ldexp(1.0, imm >> 4);
  const double rounded = std::nearbyint(static_cast<double>(x) * scale) / scale;
  return reduce ? static_cast<float>(static_cast<double>(x) - rounded)
                : static_cast<float>(rounded);
}

TEST_F(FloatTest, RoundScaleAndReduce) {
  for (std::uint8_t imm : {0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x11, 0x22, 0x43, 0xF0, 0x5C}) {
    for (bool reduce : {false, true}) {
      VectorOp op;
      op.name = std::string(reduce ? "vreduceps" : "vrndscaleps") + " imm " + std::to_string(imm);
      op.element_bytes = op.broadcast_bytes = 4;
      op.inputs = [](Random& r) { return float_inputs(r); };
      op.emit = [imm, reduce](CodeGenerator& g, const Operands& o, unsigned vl) {
        if (reduce) {
          g.vreduceps(o.dst(vl), o.src2(vl), imm);
        } else {
          g.vrndscaleps(o.dst(vl), o.src2(vl), imm);
        }
      };
      op.reference = [imm, reduce](const Inputs& in, unsigned vl) {
        return map1<float>(in.src2, vl,
                           [imm, reduce](float x) { return round_scaled(x, imm, reduce); });
      };
      check(op, false);
    }
  }
}

// vrndscaleps with M = 0 is vroundps: the emulated EVEX form against the native VEX one.
TEST_F(FloatTest, RoundScaleMatchesNativeRound) {
  for (std::uint8_t imm : {0x00, 0x01, 0x02, 0x03, 0x04, 0x08, 0x09}) {
    VectorOp op;
    op.name = "vrndscaleps vs vroundps imm " + std::to_string(imm);
    op.element_bytes = 4;
    op.inputs = [](Random& r) { return float_inputs(r); };
    op.emit = [imm](CodeGenerator& g, const Operands& o, unsigned vl) {
      if (o.dst_index() >= 16) {
        g.vrndscaleps(o.dst(vl), o.src2(vl), imm);
      } else {
        g.vroundps(o.dst(vl), o.src2(vl), imm);
      }
    };
    SCOPED_TRACE(op.name);
    check_against_native(op);
  }
}

TEST_F(FloatTest, Scalef) {
  VectorOp op = float_binary("vscalefps", emit3<&CodeGenerator::vscalefps>,
                             [](float, float) { return 0.0f; });
  op.inputs = [](Random& random) {
    Inputs in = float_inputs(random);
    for (unsigned i = 0; i < 16; ++i)
      if (random.next() % 4) in.src2.set<float>(i, random.uniform(-160, 160));
    return in;
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    return map2<float>(in.src1, in.src2, vl, [](float a, float b) {
      if (is_nan(a)) return quiet(a);
      if (is_nan(b)) return quiet(b);
      if (std::isinf(b)) {
        if ((b > 0 && a == 0) || (b < 0 && std::isinf(a))) return from_bits(0xFFC00000u);
        return b > 0 ? a * INFINITY : a * 0.0f;
      }
      return static_cast<float>(
          std::ldexp(static_cast<double>(a), static_cast<int>(std::floor(b))));
    });
  };
  check(op, false);
}

// Hardware returns a table-based approximation; the SDM bounds its relative error by
// 2^-14. Special values are exact.
TEST_F(FloatTest, ReciprocalApproximationsWithinBound) {
  using namespace reg;
  for (bool square_root : {false, true}) {
    Jit jit;
    jit.vmovups(zmm17, jit.ptr[rdi]);
    if (square_root) {
      jit.vrsqrt14ps(zmm16, zmm17);
    } else {
      jit.vrcp14ps(zmm16, zmm17);
    }
    jit.vmovups(jit.ptr[rsi], zmm16);
    for (int seed = 1; seed <= 20; ++seed) {
      Random random(seed);
      alignas(64) Vec512 in = random.floats(1e6f);
      if (seed == 1) {
        const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, 1.0f, 4.0f, -2.0f, 0x1p-140f};
        for (unsigned i = 0; i < 8; ++i) in.set<float>(i, specials[i]);
      }
      Vec512 out;
      jit.run(&in, &out);
      for (unsigned i = 0; i < 16; ++i) {
        const float x = in.get<float>(i), y = out.get<float>(i);
        if (square_root && x < 0) {
          EXPECT_TRUE(is_nan(y)) << "vrsqrt14ps(" << x << ")";
          continue;
        }
        double exact = square_root ? 1.0 / std::sqrt(static_cast<double>(x)) : 1.0 / x;
        if (std::fabs(exact) > FLT_MAX) exact = std::copysign(INFINITY, exact);
        if (std::isinf(exact) || exact == 0) {
          EXPECT_EQ(static_cast<double>(y), exact)
              << (square_root ? "vrsqrt14ps(" : "vrcp14ps(") << x << ")";
        } else {
          EXPECT_LE(std::fabs(y - exact) / std::fabs(exact), 0x1p-14)
              << (square_root ? "vrsqrt14ps(" : "vrcp14ps(") << x << ") = " << y;
        }
      }
    }
  }
}

TEST_F(FloatTest, BitwiseLogic) {
  using U = std::uint32_t;
  auto logic = [](const char* name, Emit3 emit, U (*fn)(U, U)) {
    VectorOp op;
    op.name = name;
    op.element_bytes = op.broadcast_bytes = 4;
    op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
      emit(g, o.dst(vl), o.src1(vl), o.src2(vl));
    };
    op.reference = [fn](const Inputs& in, unsigned vl) {
      return map2<U>(in.src1, in.src2, vl, fn);
    };
    return op;
  };
  check(logic("vandps", emit3<&CodeGenerator::vandps>, [](U a, U b) { return a & b; }), true);
  check(logic("vandnps", emit3<&CodeGenerator::vandnps>, [](U a, U b) { return ~a & b; }), true);
  check(logic("vorps", emit3<&CodeGenerator::vorps>, [](U a, U b) { return a | b; }), true);
  check(logic("vxorps", emit3<&CodeGenerator::vxorps>, [](U a, U b) { return a ^ b; }), true);
}

bool float_predicate(unsigned predicate, float a, float b) {
  const bool unordered = is_nan(a) || is_nan(b);
  const bool eq = !unordered && a == b, lt = !unordered && a < b, gt = !unordered && a > b;
  switch (predicate & 0xF) {
    case 0x0:
      return eq;
    case 0x1:
      return lt;
    case 0x2:
      return lt || eq;
    case 0x3:
      return unordered;
    case 0x4:
      return !eq;
    case 0x5:
      return !lt;
    case 0x6:
      return !(lt || eq);
    case 0x7:
      return !unordered;
    case 0x8:
      return eq || unordered;
    case 0x9:
      return !(gt || eq);
    case 0xA:
      return !gt;
    case 0xB:
      return false;
    case 0xC:
      return !eq && !unordered;
    case 0xD:
      return gt || eq;
    case 0xE:
      return gt;
    default:
      return true;
  }
}

TEST_F(FloatTest, CompareIntoOpmaskAllPredicates) {
  for (unsigned predicate = 0; predicate < 32; ++predicate) {
    CompareOp op;
    op.name = "vcmpps predicate " + std::to_string(predicate);
    op.element_bytes = op.broadcast_bytes = 4;
    op.inputs = [](Random& random) {
      Inputs in = float_inputs(random);
      for (unsigned i = 0; i < 16; ++i)
        if (random.next() % 3 == 0) in.src2.set<float>(i, in.src1.get<float>(i));
      return in;
    };
    op.emit = [predicate](CodeGenerator& g, const Xbyak::Opmask& k, const Xmm& a,
                          const Operand& b) {
      g.vcmpps(k, a, b, static_cast<std::uint8_t>(predicate));
    };
    op.holds = [predicate](const Inputs& in, unsigned i) {
      return float_predicate(predicate, in.src1.get<float>(i), in.src2.get<float>(i));
    };
    check_compare_op(op);
  }
}

TEST_F(FloatTest, BlendByOpmask) {
  VectorOp op;
  op.name = "vblendmps";
  op.element_bytes = op.broadcast_bytes = 4;
  op.opmask_selects = true;
  op.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vblendmps(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i) {
      if (in.masking == Masking::kNone || ((in.mask >> i) & 1)) {
        r.set<float>(i, in.src2.get<float>(i));
      } else if (in.masking == Masking::kMerge) {
        r.set<float>(i, in.src1.get<float>(i));
      }
    }
    return r;
  };
  check(op, false);
}

// Scalar forms: element 0 computed (under mask bit 0), the rest of the xmm from src1.
template <typename F, typename Fn>
VectorOp scalar(const char* name, Emit3 emit, Fn fn) {
  VectorOp op;
  op.name = name;
  op.lengths = {16};
  op.element_bytes = sizeof(F);
  op.opmask_selects = true;
  op.inputs = [](Random& r) { return float_inputs(r); };
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned) {
    emit(g, o.dst(16), o.src1(16), o.src2(16));
  };
  op.reference = [fn](const Inputs& in, unsigned) {
    Vec512 r = in.src1;
    std::memset(r.bytes + 16, 0, 48);
    F value = fn(in.src1.get<F>(0), in.src2.get<F>(0));
    if (in.masking != Masking::kNone && !(in.mask & 1))
      value = in.masking == Masking::kZero ? F(0) : in.dst.get<F>(0);
    r.set<F>(0, value);
    return r;
  };
  return op;
}

template <typename F>
F propagate_any(F a, F b, F (*fn)(F, F)) {
  if (std::isnan(a)) {
    std::uint64_t raw = 0;
    std::memcpy(&raw, &a, sizeof(F));
    raw |= sizeof(F) == 4 ? 0x00400000u : 0x0008000000000000u;
    std::memcpy(&a, &raw, sizeof(F));
    return a;
  }
  if (std::isnan(b)) return propagate_any(b, a, fn);
  return fn(a, b);
}

TEST_F(FloatTest, ScalarForms) {
  check(scalar<float>("vaddss", emit3<&CodeGenerator::vaddss>,
                      [](float a, float b) {
                        return propagate_any<float>(a, b, [](float x, float y) { return x + y; });
                      }),
        false);
  check(scalar<float>("vsubss", emit3<&CodeGenerator::vsubss>,
                      [](float a, float b) {
                        return propagate_any<float>(a, b, [](float x, float y) { return x - y; });
                      }),
        false);
  check(scalar<float>("vmulss", emit3<&CodeGenerator::vmulss>,
                      [](float a, float b) {
                        return propagate_any<float>(a, b, [](float x, float y) { return x * y; });
                      }),
        false);
  check(scalar<float>("vdivss", emit3<&CodeGenerator::vdivss>,
                      [](float a, float b) {
                        return propagate_any<float>(a, b, [](float x, float y) { return x / y; });
                      }),
        false);
  check(scalar<float>("vmaxss", emit3<&CodeGenerator::vmaxss>,
                      [](float a, float b) { return a > b ? a : b; }),
        false);
  check(scalar<float>("vminss", emit3<&CodeGenerator::vminss>,
                      [](float a, float b) { return a < b ? a : b; }),
        false);
  check(scalar<float>("vsqrtss", emit3<static_cast<SqrtScalar>(&CodeGenerator::vsqrtss)>,
                      [](float, float b) { return is_nan(b) ? quiet(b) : std::sqrt(b); }),
        false);
  check(scalar<double>("vaddsd", emit3<&CodeGenerator::vaddsd>,
                       [](double a, double b) {
                         return propagate_any<double>(a, b,
                                                      [](double x, double y) { return x + y; });
                       }),
        false);
  check(scalar<double>("vsubsd", emit3<&CodeGenerator::vsubsd>,
                       [](double a, double b) {
                         return propagate_any<double>(a, b,
                                                      [](double x, double y) { return x - y; });
                       }),
        false);
  check(scalar<double>("vmulsd", emit3<&CodeGenerator::vmulsd>,
                       [](double a, double b) {
                         return propagate_any<double>(a, b,
                                                      [](double x, double y) { return x * y; });
                       }),
        false);
  check(scalar<double>("vdivsd", emit3<&CodeGenerator::vdivsd>,
                       [](double a, double b) {
                         return propagate_any<double>(a, b,
                                                      [](double x, double y) { return x / y; });
                       }),
        false);
  check(scalar<double>("vmaxsd", emit3<&CodeGenerator::vmaxsd>,
                       [](double a, double b) { return a > b ? a : b; }),
        false);
  check(scalar<double>("vminsd", emit3<&CodeGenerator::vminsd>,
                       [](double a, double b) { return a < b ? a : b; }),
        false);
  check(scalar<double>("vsqrtsd", emit3<static_cast<SqrtScalar>(&CodeGenerator::vsqrtsd)>,
                       [](double, double b) {
                         return std::isnan(b) ? propagate_any<double>(b, b, nullptr) : std::sqrt(b);
                       }),
        false);
}

}  // namespace
}  // namespace qforge::emulate::test
