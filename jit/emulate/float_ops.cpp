// EVEX float ALU (packed single precision, and the scalar ss/sd forms of the basic
// operations): arithmetic, FMA, min/max, sqrt, rounding/reduction/scaling, reciprocal
// approximations, bitwise logic, compares into an opmask, blends.
//
// Arithmetic runs as C++ float/double operations on the host, whose MXCSR the handler set
// to the guest's (RC, FTZ, DAZ; embedded rounding applied), so results round exactly as
// the hardware's. What the host would do differently is handled here explicitly:
//   - NaN results: the first NaN source, quieted (the host compiler may commute operands);
//   - DAZ for instructions that return an input unchanged (min/max, compares, rounding).
#include <cmath>
#include <cstdint>

#include "jit/emulate/elementwise.h"
#include "jit/emulate/float_bits.h"
#include "jit/emulate/float_env.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

bool daz_enabled(const Operation& op) {
  return op.guest_mxcsr() & kMxcsrDaz;
}

// --- binary arithmetic: packed ps and scalar ss/sd ---------------------------------------

template <typename F>
struct Add {
  static constexpr bool kPropagatesNan = true;
  static F apply(F a, F b) { return a + b; }
};
template <typename F>
struct Subtract {
  static constexpr bool kPropagatesNan = true;
  static F apply(F a, F b) { return a - b; }
};
template <typename F>
struct Multiply {
  static constexpr bool kPropagatesNan = true;
  static F apply(F a, F b) { return a * b; }
};
template <typename F>
struct Divide {
  static constexpr bool kPropagatesNan = true;
  static F apply(F a, F b) { return a / b; }
};
// vmax/vmin return the second source when either is NaN or both are zeros.
template <typename F>
struct Maximum {
  static constexpr bool kPropagatesNan = false;
  static F apply(F a, F b) { return a > b ? a : b; }
};
template <typename F>
struct Minimum {
  static constexpr bool kPropagatesNan = false;
  static F apply(F a, F b) { return a < b ? a : b; }
};

template <typename F, template <typename> class Op>
F binary(F a, F b, bool daz) {
  a = denormal_as_zero(a, daz);
  b = denormal_as_zero(b, daz);
  if (Op<F>::kPropagatesNan) {
    if (is_nan(a)) return quiet(a);
    if (is_nan(b)) return quiet(b);
  }
  return Op<F>::apply(a, b);
}

template <typename F>
F square_root(F x, bool daz) {
  x = denormal_as_zero(x, daz);
  return is_nan(x) ? quiet(x) : std::sqrt(x);
}

template <template <typename> class Op>
Status packed(Operation& op) {
  const bool daz = daz_enabled(op);
  return map_binary<float>(op, [daz](float a, float b) { return binary<float, Op>(a, b, daz); });
}

Status packed_sqrt(Operation& op) {
  const bool daz = daz_enabled(op);
  return map_unary<float>(op, [daz](float x) { return square_root(x, daz); });
}

// Scalar forms: element 0 = f(src1[0], src2[0]) under mask bit 0, elements above it of
// the xmm from src1, bits 511:128 zeroed.
template <typename F, typename Fn>
Status scalar(Operation& op, Fn fn) {
  const Vec a = op.source(1), b = op.source(2);
  Vec r = a;
  F value = fn(a.get<F>(0), b.get<F>(0));
  if (!op.selected(0)) value = op.zeroing() ? F(0) : op.source(0).get<F>(0);
  r.set<F>(0, value);
  op.write_destination_unmasked(r, 16);
  return Status::kDone;
}

template <typename F, template <typename> class Op>
Status scalar_binary(Operation& op) {
  const bool daz = daz_enabled(op);
  return scalar<F>(op, [daz](F a, F b) { return binary<F, Op>(a, b, daz); });
}

template <typename F>
Status scalar_sqrt(Operation& op) {
  const bool daz = daz_enabled(op);
  return scalar<F>(op, [daz](F, F b) { return square_root(b, daz); });
}

// --- fused multiply-add -----------------------------------------------------------------

// Which operands are multiplied: 132 = dest * src3 + src2, 213 = src2 * dest + src3,
// 231 = src2 * src3 + dest (dest = operand 1, src2 = operand 2, src3 = operand 3).
enum class FmaOrder { k132, k213, k231 };

// One rounding (std::fma is the correctly rounded fmaf). A NaN source gives the first
// NaN in operand order, quieted; signs are applied to the non-NaN operands only.
template <FmaOrder kOrder, bool kNegateProduct, bool kNegateAddend>
Status fused_multiply_add(Operation& op) {
  const bool daz = daz_enabled(op);
  return map_ternary<float>(op, [daz](float d, float s2, float s3) {
    d = denormal_as_zero(d, daz);
    s2 = denormal_as_zero(s2, daz);
    s3 = denormal_as_zero(s3, daz);
    if (is_nan(d)) return quiet(d);
    if (is_nan(s2)) return quiet(s2);
    if (is_nan(s3)) return quiet(s3);
    float x = s2, y = s3, z = d;
    if (kOrder == FmaOrder::k132) x = d, y = s3, z = s2;
    if (kOrder == FmaOrder::k213) x = s2, y = d, z = s3;
    if (kNegateProduct) x = -x;
    if (kNegateAddend) z = -z;
    return std::fma(x, y, z);
  });
}

// --- rounding to a number of fraction bits ----------------------------------------------

// imm8 of vrndscale/vreduce: [7:4] M = fraction bits kept, [2] use MXCSR.RC, [1:0] RC.
unsigned immediate_rounding(const Operation& op) {
  const std::uint8_t imm = op.immediate();
  return (imm & 4) ? op.rounding_control() : (imm & 3u);
}

// 2^-M * round(2^M * x), exactly, in the host's current rounding mode (x finite).
double round_to_fraction_bits(float x, unsigned m) {
  const double scale = static_cast<double>(1u << m);
  return std::nearbyint(static_cast<double>(x) * scale) / scale;
}

Status round_scale(Operation& op) {
  const bool daz = daz_enabled(op);
  const unsigned m = op.immediate() >> 4;
  set_host_rounding(immediate_rounding(op));
  return map_unary<float>(op, [daz, m](float x) {
    x = denormal_as_zero(x, daz);
    if (is_nan(x)) return quiet(x);
    if (is_infinite(x)) return x;
    return static_cast<float>(round_to_fraction_bits(x, m));
  });
}

// vreduceps: x - 2^-M * round(2^M * x); infinities reduce to zero.
Status reduce(Operation& op) {
  const bool daz = daz_enabled(op);
  const unsigned m = op.immediate() >> 4;
  const unsigned rounding = immediate_rounding(op);
  set_host_rounding(rounding);
  return map_unary<float>(op, [daz, m, rounding](float x) {
    x = denormal_as_zero(x, daz);
    if (is_nan(x)) return quiet(x);
    if (is_infinite(x)) return rounding == kRoundDown ? -0.0f : 0.0f;
    return static_cast<float>(static_cast<double>(x) - round_to_fraction_bits(x, m));
  });
}

// vscalefps: src1 * 2^floor(src2), rounded once. The product is exact in double (float
// significand, exponent within +-700) and the conversion to float rounds and flushes as
// the guest's MXCSR says. 0 * 2^+inf and inf * 2^-inf are invalid.
Status scale(Operation& op) {
  const bool daz = daz_enabled(op);
  return map_binary<float>(op, [daz](float a, float b) {
    a = denormal_as_zero(a, daz);
    b = denormal_as_zero(b, daz);
    if (is_nan(a)) return quiet(a);
    if (is_nan(b)) return quiet(b);
    if (is_infinite(b)) {
      if (b > 0) return a == 0 ? indefinite<float>() : static_cast<float>(a * HUGE_VAL);
      return is_infinite(a) ? indefinite<float>() : static_cast<float>(a * 0.0);
    }
    double exponent = std::floor(static_cast<double>(b));
    exponent = exponent < -400 ? -400 : (exponent > 400 ? 400 : exponent);
    const auto biased = static_cast<std::uint64_t>(static_cast<std::int64_t>(exponent) + 1023);
    return static_cast<float>(static_cast<double>(a) * from_bits<double>(biased << 52));
  });
}

// vrcp14ps / vrsqrt14ps: the hardware returns an approximation with relative error below
// 2^-14 from a table; this emulation returns the correctly rounded 1/x and 1/sqrt(x)
// (within that bound, not bit-identical). Round to nearest regardless of MXCSR.RC.
Status reciprocal(Operation& op) {
  const bool daz = daz_enabled(op);
  set_host_rounding(kRoundNearest);
  return map_unary<float>(op, [daz](float x) {
    x = denormal_as_zero(x, daz);
    if (is_nan(x)) return quiet(x);
    return 1.0f / x;
  });
}

Status reciprocal_sqrt(Operation& op) {
  const bool daz = daz_enabled(op);
  set_host_rounding(kRoundNearest);
  return map_unary<float>(op, [daz](float x) {
    x = denormal_as_zero(x, daz);
    if (is_nan(x)) return quiet(x);
    if (x == 0) return std::copysign(HUGE_VALF, x);
    if (x < 0) return indefinite<float>();
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(x)));
  });
}

// --- bitwise, compare, blend ------------------------------------------------------------

template <typename Fn>
Status bitwise(Operation& op, Fn fn) {
  return map_binary<std::uint32_t>(op, fn);
}
Status and_ps(Operation& op) {
  return bitwise(op, [](std::uint32_t a, std::uint32_t b) { return a & b; });
}
Status and_not_ps(Operation& op) {
  return bitwise(op, [](std::uint32_t a, std::uint32_t b) { return ~a & b; });
}
Status or_ps(Operation& op) {
  return bitwise(op, [](std::uint32_t a, std::uint32_t b) { return a | b; });
}
Status xor_ps(Operation& op) {
  return bitwise(op, [](std::uint32_t a, std::uint32_t b) { return a ^ b; });
}

// The 32 vcmpps predicates (imm8[4:0]); bit 4 only changes which NaNs signal.
bool float_compare(unsigned predicate, float a, float b) {
  const bool unordered = is_nan(a) || is_nan(b);
  switch (predicate & 0xF) {
    case 0x0:
      return !unordered && a == b;  // EQ_OQ
    case 0x1:
      return !unordered && a < b;  // LT_OS
    case 0x2:
      return !unordered && a <= b;  // LE_OS
    case 0x3:
      return unordered;  // UNORD_Q
    case 0x4:
      return unordered || a != b;  // NEQ_UQ
    case 0x5:
      return unordered || !(a < b);  // NLT_US
    case 0x6:
      return unordered || !(a <= b);  // NLE_US
    case 0x7:
      return !unordered;  // ORD_Q
    case 0x8:
      return unordered || a == b;  // EQ_UQ
    case 0x9:
      return unordered || a < b;  // NGE_US
    case 0xA:
      return unordered || a <= b;  // NGT_US
    case 0xB:
      return false;  // FALSE_OQ
    case 0xC:
      return !unordered && a != b;  // NEQ_OQ
    case 0xD:
      return !unordered && a >= b;  // GE_OS
    case 0xE:
      return !unordered && a > b;  // GT_OS
    default:
      return true;  // TRUE_UQ
  }
}

Status compare_ps(Operation& op) {
  const bool daz = daz_enabled(op);
  const unsigned predicate = op.immediate();
  const Vec a = op.source(1), b = op.source(2);
  std::uint64_t bits = 0;
  for (unsigned i = 0; i < op.vector_bytes() / 4; ++i) {
    const float x = denormal_as_zero(a.get<float>(i), daz);
    const float y = denormal_as_zero(b.get<float>(i), daz);
    if (op.selected(i) && float_compare(predicate, x, y)) bits |= std::uint64_t{1} << i;
  }
  op.registers().set_opmask(op.register_index(0), bits);
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VADDPS, packed<Add>},
    {ZYDIS_MNEMONIC_VSUBPS, packed<Subtract>},
    {ZYDIS_MNEMONIC_VMULPS, packed<Multiply>},
    {ZYDIS_MNEMONIC_VDIVPS, packed<Divide>},
    {ZYDIS_MNEMONIC_VMAXPS, packed<Maximum>},
    {ZYDIS_MNEMONIC_VMINPS, packed<Minimum>},
    {ZYDIS_MNEMONIC_VSQRTPS, packed_sqrt},
    {ZYDIS_MNEMONIC_VADDSS, scalar_binary<float, Add>},
    {ZYDIS_MNEMONIC_VSUBSS, scalar_binary<float, Subtract>},
    {ZYDIS_MNEMONIC_VMULSS, scalar_binary<float, Multiply>},
    {ZYDIS_MNEMONIC_VDIVSS, scalar_binary<float, Divide>},
    {ZYDIS_MNEMONIC_VMAXSS, scalar_binary<float, Maximum>},
    {ZYDIS_MNEMONIC_VMINSS, scalar_binary<float, Minimum>},
    {ZYDIS_MNEMONIC_VSQRTSS, scalar_sqrt<float>},
    {ZYDIS_MNEMONIC_VADDSD, scalar_binary<double, Add>},
    {ZYDIS_MNEMONIC_VSUBSD, scalar_binary<double, Subtract>},
    {ZYDIS_MNEMONIC_VMULSD, scalar_binary<double, Multiply>},
    {ZYDIS_MNEMONIC_VDIVSD, scalar_binary<double, Divide>},
    {ZYDIS_MNEMONIC_VMAXSD, scalar_binary<double, Maximum>},
    {ZYDIS_MNEMONIC_VMINSD, scalar_binary<double, Minimum>},
    {ZYDIS_MNEMONIC_VSQRTSD, scalar_sqrt<double>},
    {ZYDIS_MNEMONIC_VFMADD132PS, fused_multiply_add<FmaOrder::k132, false, false>},
    {ZYDIS_MNEMONIC_VFMADD213PS, fused_multiply_add<FmaOrder::k213, false, false>},
    {ZYDIS_MNEMONIC_VFMADD231PS, fused_multiply_add<FmaOrder::k231, false, false>},
    {ZYDIS_MNEMONIC_VFMSUB132PS, fused_multiply_add<FmaOrder::k132, false, true>},
    {ZYDIS_MNEMONIC_VFMSUB213PS, fused_multiply_add<FmaOrder::k213, false, true>},
    {ZYDIS_MNEMONIC_VFMSUB231PS, fused_multiply_add<FmaOrder::k231, false, true>},
    {ZYDIS_MNEMONIC_VFNMADD132PS, fused_multiply_add<FmaOrder::k132, true, false>},
    {ZYDIS_MNEMONIC_VFNMADD213PS, fused_multiply_add<FmaOrder::k213, true, false>},
    {ZYDIS_MNEMONIC_VFNMADD231PS, fused_multiply_add<FmaOrder::k231, true, false>},
    {ZYDIS_MNEMONIC_VFNMSUB132PS, fused_multiply_add<FmaOrder::k132, true, true>},
    {ZYDIS_MNEMONIC_VFNMSUB213PS, fused_multiply_add<FmaOrder::k213, true, true>},
    {ZYDIS_MNEMONIC_VFNMSUB231PS, fused_multiply_add<FmaOrder::k231, true, true>},
    {ZYDIS_MNEMONIC_VRNDSCALEPS, round_scale},
    {ZYDIS_MNEMONIC_VREDUCEPS, reduce},
    {ZYDIS_MNEMONIC_VSCALEFPS, scale},
    {ZYDIS_MNEMONIC_VRCP14PS, reciprocal},
    {ZYDIS_MNEMONIC_VRSQRT14PS, reciprocal_sqrt},
    {ZYDIS_MNEMONIC_VANDPS, and_ps},
    {ZYDIS_MNEMONIC_VANDNPS, and_not_ps},
    {ZYDIS_MNEMONIC_VORPS, or_ps},
    {ZYDIS_MNEMONIC_VXORPS, xor_ps},
    {ZYDIS_MNEMONIC_VCMPPS, compare_ps},
    {ZYDIS_MNEMONIC_VBLENDMPS, blend_by_mask<std::uint32_t>},
};

}  // namespace

std::span<const OpEntry> float_ops() {
  return kOps;
}

}  // namespace qforge::emulate
