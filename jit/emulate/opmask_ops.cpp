// VEX-encoded opmask instructions (AVX512F/BW/DQ): k-register moves, logic, shifts, add,
// unpack, and the tests that set RFLAGS. Each works on the low W bits (W = 8, 16, 32, 64
// for the b/w/d/q forms); a k destination is zeroed above W.
#include <cstdint>

#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

template <unsigned kWidth>
constexpr std::uint64_t width_mask() {
  return kWidth == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << kWidth) - 1;
}

std::uint64_t opmask_source(Operation& op, unsigned i) {
  return op.source(i).get<std::uint64_t>(0);
}

void set_opmask_destination(Operation& op, std::uint64_t value) {
  op.registers().set_opmask(op.register_index(0), value);
}

// kmov: k <- k/GPR/memory, GPR <- k (zero-extended), memory <- k.
template <unsigned kWidth>
Status move(Operation& op) {
  const std::uint64_t value = opmask_source(op, 1) & width_mask<kWidth>();
  if (op.is_opmask_register(0)) {
    set_opmask_destination(op, value);
  } else if (op.is_memory(0)) {
    write_memory(op.address(0), &value, kWidth / 8);
  } else {
    op.registers().set_gpr(op.operand(0).reg.value, value);
  }
  return Status::kDone;
}

enum class Logic { kAnd, kAndNot, kOr, kXor, kXnor, kAdd };

template <unsigned kWidth, Logic kLogic>
Status logic(Operation& op) {
  const std::uint64_t a = opmask_source(op, 1), b = opmask_source(op, 2);
  std::uint64_t r = 0;
  switch (kLogic) {
    case Logic::kAnd:
      r = a & b;
      break;
    case Logic::kAndNot:
      r = ~a & b;
      break;
    case Logic::kOr:
      r = a | b;
      break;
    case Logic::kXor:
      r = a ^ b;
      break;
    case Logic::kXnor:
      r = ~(a ^ b);
      break;
    case Logic::kAdd:
      r = a + b;
      break;
  }
  set_opmask_destination(op, r & width_mask<kWidth>());
  return Status::kDone;
}

template <unsigned kWidth>
Status logic_not(Operation& op) {
  set_opmask_destination(op, ~opmask_source(op, 1) & width_mask<kWidth>());
  return Status::kDone;
}

// kshiftl/kshiftr by imm8; counts of W or more give 0.
template <unsigned kWidth, bool kLeft>
Status shift(Operation& op) {
  const unsigned count = op.immediate();
  const std::uint64_t value = opmask_source(op, 1) & width_mask<kWidth>();
  std::uint64_t r = 0;
  if (count < kWidth) r = kLeft ? value << count : value >> count;
  set_opmask_destination(op, r & width_mask<kWidth>());
  return Status::kDone;
}

// kunpckbw/wd/dq: dest = src1[half-1:0] : src2[half-1:0] (src1 in the upper half).
template <unsigned kWidth>
Status unpack(Operation& op) {
  constexpr unsigned kHalf = kWidth / 2;
  const std::uint64_t high = opmask_source(op, 1) & width_mask<kHalf>();
  const std::uint64_t low = opmask_source(op, 2) & width_mask<kHalf>();
  set_opmask_destination(op, (high << kHalf) | low);
  return Status::kDone;
}

// RFLAGS bits (CF, PF, AF, ZF, SF, OF); the tests set ZF and CF and clear the others.
constexpr std::uint64_t kCarry = 1u << 0, kZero = 1u << 6;
constexpr std::uint64_t kArithmeticFlags =
    kCarry | (1u << 2) | (1u << 4) | kZero | (1u << 7) | (1u << 11);

void set_test_flags(Operation& op, bool zero, bool carry) {
  std::uint64_t flags = op.registers().rflags() & ~kArithmeticFlags;
  if (zero) flags |= kZero;
  if (carry) flags |= kCarry;
  op.registers().set_rflags(flags);
}

// kortest: ZF = (a | b) == 0, CF = (a | b) == all ones.
template <unsigned kWidth>
Status or_test(Operation& op) {
  const std::uint64_t r = (opmask_source(op, 0) | opmask_source(op, 1)) & width_mask<kWidth>();
  set_test_flags(op, r == 0, r == width_mask<kWidth>());
  return Status::kDone;
}

// ktest: ZF = (a & b) == 0, CF = (~a & b) == 0.
template <unsigned kWidth>
Status and_test(Operation& op) {
  const std::uint64_t a = opmask_source(op, 0), b = opmask_source(op, 1);
  set_test_flags(op, (a & b & width_mask<kWidth>()) == 0, (~a & b & width_mask<kWidth>()) == 0);
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_KMOVB, move<8>},
    {ZYDIS_MNEMONIC_KMOVW, move<16>},
    {ZYDIS_MNEMONIC_KMOVD, move<32>},
    {ZYDIS_MNEMONIC_KMOVQ, move<64>},
    {ZYDIS_MNEMONIC_KANDB, logic<8, Logic::kAnd>},
    {ZYDIS_MNEMONIC_KANDW, logic<16, Logic::kAnd>},
    {ZYDIS_MNEMONIC_KANDD, logic<32, Logic::kAnd>},
    {ZYDIS_MNEMONIC_KANDQ, logic<64, Logic::kAnd>},
    {ZYDIS_MNEMONIC_KANDNB, logic<8, Logic::kAndNot>},
    {ZYDIS_MNEMONIC_KANDNW, logic<16, Logic::kAndNot>},
    {ZYDIS_MNEMONIC_KANDND, logic<32, Logic::kAndNot>},
    {ZYDIS_MNEMONIC_KANDNQ, logic<64, Logic::kAndNot>},
    {ZYDIS_MNEMONIC_KORB, logic<8, Logic::kOr>},
    {ZYDIS_MNEMONIC_KORW, logic<16, Logic::kOr>},
    {ZYDIS_MNEMONIC_KORD, logic<32, Logic::kOr>},
    {ZYDIS_MNEMONIC_KORQ, logic<64, Logic::kOr>},
    {ZYDIS_MNEMONIC_KXORB, logic<8, Logic::kXor>},
    {ZYDIS_MNEMONIC_KXORW, logic<16, Logic::kXor>},
    {ZYDIS_MNEMONIC_KXORD, logic<32, Logic::kXor>},
    {ZYDIS_MNEMONIC_KXORQ, logic<64, Logic::kXor>},
    {ZYDIS_MNEMONIC_KXNORB, logic<8, Logic::kXnor>},
    {ZYDIS_MNEMONIC_KXNORW, logic<16, Logic::kXnor>},
    {ZYDIS_MNEMONIC_KXNORD, logic<32, Logic::kXnor>},
    {ZYDIS_MNEMONIC_KXNORQ, logic<64, Logic::kXnor>},
    {ZYDIS_MNEMONIC_KADDB, logic<8, Logic::kAdd>},
    {ZYDIS_MNEMONIC_KADDW, logic<16, Logic::kAdd>},
    {ZYDIS_MNEMONIC_KADDD, logic<32, Logic::kAdd>},
    {ZYDIS_MNEMONIC_KADDQ, logic<64, Logic::kAdd>},
    {ZYDIS_MNEMONIC_KNOTB, logic_not<8>},
    {ZYDIS_MNEMONIC_KNOTW, logic_not<16>},
    {ZYDIS_MNEMONIC_KNOTD, logic_not<32>},
    {ZYDIS_MNEMONIC_KNOTQ, logic_not<64>},
    {ZYDIS_MNEMONIC_KSHIFTLB, shift<8, true>},
    {ZYDIS_MNEMONIC_KSHIFTLW, shift<16, true>},
    {ZYDIS_MNEMONIC_KSHIFTLD, shift<32, true>},
    {ZYDIS_MNEMONIC_KSHIFTLQ, shift<64, true>},
    {ZYDIS_MNEMONIC_KSHIFTRB, shift<8, false>},
    {ZYDIS_MNEMONIC_KSHIFTRW, shift<16, false>},
    {ZYDIS_MNEMONIC_KSHIFTRD, shift<32, false>},
    {ZYDIS_MNEMONIC_KSHIFTRQ, shift<64, false>},
    {ZYDIS_MNEMONIC_KUNPCKBW, unpack<16>},
    {ZYDIS_MNEMONIC_KUNPCKWD, unpack<32>},
    {ZYDIS_MNEMONIC_KUNPCKDQ, unpack<64>},
    {ZYDIS_MNEMONIC_KORTESTB, or_test<8>},
    {ZYDIS_MNEMONIC_KORTESTW, or_test<16>},
    {ZYDIS_MNEMONIC_KORTESTD, or_test<32>},
    {ZYDIS_MNEMONIC_KORTESTQ, or_test<64>},
    {ZYDIS_MNEMONIC_KTESTB, and_test<8>},
    {ZYDIS_MNEMONIC_KTESTW, and_test<16>},
    {ZYDIS_MNEMONIC_KTESTD, and_test<32>},
    {ZYDIS_MNEMONIC_KTESTQ, and_test<64>},
};

}  // namespace

std::span<const OpEntry> opmask_ops() {
  return kOps;
}

}  // namespace qforge::emulate
