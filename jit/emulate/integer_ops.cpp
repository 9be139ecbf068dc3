// EVEX integer ALU: add/sub/multiply, bitwise logic, shifts, min/max, abs, multiply-add,
// compares into an opmask, and blends by opmask. Each instruction is one element-wise
// formula from the SDM over elements of the width its mnemonic names.
#include <cstdint>

#include "jit/emulate/elementwise.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

using std::int16_t, std::int32_t, std::int64_t, std::int8_t;
using std::uint16_t, std::uint32_t, std::uint64_t, std::uint8_t;

template <typename T>
Status add(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return static_cast<T>(uint64_t{a} + b); });
}

template <typename T>
Status subtract(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return static_cast<T>(uint64_t{a} - b); });
}

// Low half of the product (signed and unsigned agree there).
template <typename T>
Status multiply_low(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return static_cast<T>(uint64_t{a} * b); });
}

template <typename T>
Status bitwise_and(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return a & b; });
}
template <typename T>
Status bitwise_and_not(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return static_cast<T>(~a & b); });
}
template <typename T>
Status bitwise_or(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return a | b; });
}
template <typename T>
Status bitwise_xor(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return a ^ b; });
}

// vpternlog: bit j of the result is imm8[(dest_j << 2) | (src1_j << 1) | src2_j].
template <typename T>
Status ternary_logic(Operation& op) {
  const uint8_t table = op.immediate();
  return map_ternary<T>(op, [table](T d, T a, T b) {
    T result = 0;
    for (unsigned index = 0; index < 8; ++index) {
      if (!((table >> index) & 1)) continue;
      result |= static_cast<T>((index & 4 ? d : static_cast<T>(~d)) &
                               (index & 2 ? a : static_cast<T>(~a)) &
                               (index & 1 ? b : static_cast<T>(~b)));
    }
    return result;
  });
}

enum class ShiftKind { kLeft, kRightLogical, kRightArithmetic };

template <typename T, ShiftKind kKind>
T shift_element(T value, uint64_t count) {
  constexpr unsigned kBits = sizeof(T) * 8;
  if (kKind == ShiftKind::kRightArithmetic) {
    const unsigned c = count > kBits - 1 ? kBits - 1 : static_cast<unsigned>(count);
    return static_cast<T>(static_cast<Signed<T>>(value) >> c);
  }
  if (count >= kBits) return 0;
  const uint64_t bits = static_cast<Unsigned<T>>(value);
  return static_cast<T>(kKind == ShiftKind::kLeft ? bits << count : bits >> count);
}

// vpsll/vpsrl/vpsra: one count for all elements, from imm8 or the low quadword of an
// xmm/m128. Logical shifts by >= the width give 0, arithmetic ones fill with the sign.
template <typename T, ShiftKind kKind>
Status shift_uniform(Operation& op) {
  const uint64_t count = op.is_immediate(2) ? op.immediate() : op.source(2).get<uint64_t>(0);
  return map_unary<T>(op, [count](T value) { return shift_element<T, kKind>(value, count); });
}

// vpsllv/vpsrlv/vpsrav: a count per element.
template <typename T, ShiftKind kKind>
Status shift_variable(Operation& op) {
  return map_binary<T>(op, [](T value, T count) {
    return shift_element<T, kKind>(value, static_cast<Unsigned<T>>(count));
  });
}

template <typename T>
Status maximum(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return a > b ? a : b; });
}
template <typename T>
Status minimum(Operation& op) {
  return map_binary<T>(op, [](T a, T b) { return a < b ? a : b; });
}

// |x|, with |min| = min (0x80.. stays 0x80..).
template <typename T>
Status absolute(Operation& op) {
  return map_unary<T>(op, [](T x) {
    return static_cast<T>(x < 0 ? Unsigned<T>(0) - static_cast<Unsigned<T>>(x) : x);
  });
}

// vpmaddubsw: word i = sat16(u8(a.byte[2i]) * s8(b.byte[2i]) + u8(a.byte[2i+1]) *
// s8(b.byte[2i+1])).
Status multiply_add_u8_s8(Operation& op) {
  return map_binary<uint16_t>(op, [](uint16_t a, uint16_t b) {
    const int32_t lo = int32_t{static_cast<uint8_t>(a)} * static_cast<int8_t>(b);
    const int32_t hi = int32_t{static_cast<uint8_t>(a >> 8)} * static_cast<int8_t>(b >> 8);
    return static_cast<uint16_t>(saturate<int16_t>(lo + hi));
  });
}

// vpmaddwd: dword i = s16 * s16 + s16 * s16 of its two word pairs (wraps only for
// 0x8000 * 0x8000 twice).
Status multiply_add_s16(Operation& op) {
  return map_binary<uint32_t>(op, [](uint32_t a, uint32_t b) {
    const int64_t lo = int64_t{static_cast<int16_t>(a)} * static_cast<int16_t>(b);
    const int64_t hi = int64_t{static_cast<int16_t>(a >> 16)} * static_cast<int16_t>(b >> 16);
    return static_cast<uint32_t>(lo + hi);
  });
}

// Comparison predicates of vpcmp (imm8[2:0]).
template <typename T>
bool compare(unsigned predicate, T a, T b) {
  switch (predicate & 7) {
    case 0:
      return a == b;
    case 1:
      return a < b;
    case 2:
      return a <= b;
    case 3:
      return false;
    case 4:
      return a != b;
    case 5:
      return a >= b;
    case 6:
      return a > b;
    default:
      return true;
  }
}

// Compare into an opmask: bit i = selected(i) && predicate(src1[i], src2[i]); bits at and
// above the element count are zero.
template <typename T>
Status compare_into_mask(Operation& op, unsigned predicate) {
  const Vec a = op.source(1), b = op.source_masked(2);
  const unsigned n = op.vector_bytes() / sizeof(T);
  uint64_t bits = 0;
  for (unsigned i = 0; i < n; ++i)
    if (op.selected(i) && compare<T>(predicate, a.get<T>(i), b.get<T>(i))) bits |= uint64_t{1} << i;
  op.registers().set_opmask(op.register_index(0), bits);
  return Status::kDone;
}

template <typename T>
Status compare_immediate(Operation& op) {
  return compare_into_mask<T>(op, op.immediate());
}
template <typename T>
Status compare_equal(Operation& op) {
  return compare_into_mask<T>(op, 0);
}
template <typename T>
Status compare_greater(Operation& op) {
  return compare_into_mask<T>(op, 6);
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VPADDB, add<uint8_t>},
    {ZYDIS_MNEMONIC_VPADDW, add<uint16_t>},
    {ZYDIS_MNEMONIC_VPADDD, add<uint32_t>},
    {ZYDIS_MNEMONIC_VPADDQ, add<uint64_t>},
    {ZYDIS_MNEMONIC_VPSUBB, subtract<uint8_t>},
    {ZYDIS_MNEMONIC_VPSUBW, subtract<uint16_t>},
    {ZYDIS_MNEMONIC_VPSUBD, subtract<uint32_t>},
    {ZYDIS_MNEMONIC_VPSUBQ, subtract<uint64_t>},
    {ZYDIS_MNEMONIC_VPMULLW, multiply_low<uint16_t>},
    {ZYDIS_MNEMONIC_VPMULLD, multiply_low<uint32_t>},
    {ZYDIS_MNEMONIC_VPMULLQ, multiply_low<uint64_t>},
    {ZYDIS_MNEMONIC_VPANDD, bitwise_and<uint32_t>},
    {ZYDIS_MNEMONIC_VPANDQ, bitwise_and<uint64_t>},
    {ZYDIS_MNEMONIC_VPANDND, bitwise_and_not<uint32_t>},
    {ZYDIS_MNEMONIC_VPANDNQ, bitwise_and_not<uint64_t>},
    {ZYDIS_MNEMONIC_VPORD, bitwise_or<uint32_t>},
    {ZYDIS_MNEMONIC_VPORQ, bitwise_or<uint64_t>},
    {ZYDIS_MNEMONIC_VPXORD, bitwise_xor<uint32_t>},
    {ZYDIS_MNEMONIC_VPXORQ, bitwise_xor<uint64_t>},
    {ZYDIS_MNEMONIC_VPTERNLOGD, ternary_logic<uint32_t>},
    {ZYDIS_MNEMONIC_VPTERNLOGQ, ternary_logic<uint64_t>},
    {ZYDIS_MNEMONIC_VPSLLW, shift_uniform<uint16_t, ShiftKind::kLeft>},
    {ZYDIS_MNEMONIC_VPSLLD, shift_uniform<uint32_t, ShiftKind::kLeft>},
    {ZYDIS_MNEMONIC_VPSLLQ, shift_uniform<uint64_t, ShiftKind::kLeft>},
    {ZYDIS_MNEMONIC_VPSRLW, shift_uniform<uint16_t, ShiftKind::kRightLogical>},
    {ZYDIS_MNEMONIC_VPSRLD, shift_uniform<uint32_t, ShiftKind::kRightLogical>},
    {ZYDIS_MNEMONIC_VPSRLQ, shift_uniform<uint64_t, ShiftKind::kRightLogical>},
    {ZYDIS_MNEMONIC_VPSRAW, shift_uniform<uint16_t, ShiftKind::kRightArithmetic>},
    {ZYDIS_MNEMONIC_VPSRAD, shift_uniform<uint32_t, ShiftKind::kRightArithmetic>},
    {ZYDIS_MNEMONIC_VPSRAQ, shift_uniform<uint64_t, ShiftKind::kRightArithmetic>},
    {ZYDIS_MNEMONIC_VPSLLVD, shift_variable<uint32_t, ShiftKind::kLeft>},
    {ZYDIS_MNEMONIC_VPSLLVQ, shift_variable<uint64_t, ShiftKind::kLeft>},
    {ZYDIS_MNEMONIC_VPSRLVD, shift_variable<uint32_t, ShiftKind::kRightLogical>},
    {ZYDIS_MNEMONIC_VPSRLVQ, shift_variable<uint64_t, ShiftKind::kRightLogical>},
    {ZYDIS_MNEMONIC_VPSRAVD, shift_variable<uint32_t, ShiftKind::kRightArithmetic>},
    {ZYDIS_MNEMONIC_VPMAXSB, maximum<int8_t>},
    {ZYDIS_MNEMONIC_VPMAXSW, maximum<int16_t>},
    {ZYDIS_MNEMONIC_VPMAXSD, maximum<int32_t>},
    {ZYDIS_MNEMONIC_VPMAXSQ, maximum<int64_t>},
    {ZYDIS_MNEMONIC_VPMAXUB, maximum<uint8_t>},
    {ZYDIS_MNEMONIC_VPMAXUW, maximum<uint16_t>},
    {ZYDIS_MNEMONIC_VPMAXUD, maximum<uint32_t>},
    {ZYDIS_MNEMONIC_VPMAXUQ, maximum<uint64_t>},
    {ZYDIS_MNEMONIC_VPMINSB, minimum<int8_t>},
    {ZYDIS_MNEMONIC_VPMINSW, minimum<int16_t>},
    {ZYDIS_MNEMONIC_VPMINSD, minimum<int32_t>},
    {ZYDIS_MNEMONIC_VPMINSQ, minimum<int64_t>},
    {ZYDIS_MNEMONIC_VPMINUB, minimum<uint8_t>},
    {ZYDIS_MNEMONIC_VPMINUW, minimum<uint16_t>},
    {ZYDIS_MNEMONIC_VPMINUD, minimum<uint32_t>},
    {ZYDIS_MNEMONIC_VPMINUQ, minimum<uint64_t>},
    {ZYDIS_MNEMONIC_VPABSB, absolute<int8_t>},
    {ZYDIS_MNEMONIC_VPABSW, absolute<int16_t>},
    {ZYDIS_MNEMONIC_VPABSD, absolute<int32_t>},
    {ZYDIS_MNEMONIC_VPABSQ, absolute<int64_t>},
    {ZYDIS_MNEMONIC_VPMADDUBSW, multiply_add_u8_s8},
    {ZYDIS_MNEMONIC_VPMADDWD, multiply_add_s16},
    {ZYDIS_MNEMONIC_VPCMPB, compare_immediate<int8_t>},
    {ZYDIS_MNEMONIC_VPCMPUB, compare_immediate<uint8_t>},
    {ZYDIS_MNEMONIC_VPCMPW, compare_immediate<int16_t>},
    {ZYDIS_MNEMONIC_VPCMPUW, compare_immediate<uint16_t>},
    {ZYDIS_MNEMONIC_VPCMPD, compare_immediate<int32_t>},
    {ZYDIS_MNEMONIC_VPCMPUD, compare_immediate<uint32_t>},
    {ZYDIS_MNEMONIC_VPCMPQ, compare_immediate<int64_t>},
    {ZYDIS_MNEMONIC_VPCMPUQ, compare_immediate<uint64_t>},
    {ZYDIS_MNEMONIC_VPCMPEQB, compare_equal<int8_t>},
    {ZYDIS_MNEMONIC_VPCMPEQW, compare_equal<int16_t>},
    {ZYDIS_MNEMONIC_VPCMPEQD, compare_equal<int32_t>},
    {ZYDIS_MNEMONIC_VPCMPEQQ, compare_equal<int64_t>},
    {ZYDIS_MNEMONIC_VPCMPGTB, compare_greater<int8_t>},
    {ZYDIS_MNEMONIC_VPCMPGTW, compare_greater<int16_t>},
    {ZYDIS_MNEMONIC_VPCMPGTD, compare_greater<int32_t>},
    {ZYDIS_MNEMONIC_VPCMPGTQ, compare_greater<int64_t>},
    {ZYDIS_MNEMONIC_VPBLENDMB, blend_by_mask<uint8_t>},
    {ZYDIS_MNEMONIC_VPBLENDMW, blend_by_mask<uint16_t>},
    {ZYDIS_MNEMONIC_VPBLENDMD, blend_by_mask<uint32_t>},
    {ZYDIS_MNEMONIC_VPBLENDMQ, blend_by_mask<uint64_t>},
};

}  // namespace

std::span<const OpEntry> integer_ops() {
  return kOps;
}

}  // namespace qforge::emulate
