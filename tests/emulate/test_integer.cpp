// EVEX integer ALU against element-wise definitions: every length, masking, memory and
// {1toN} sources; cross-checked against the native VEX instruction where AVX2 has one.
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

using std::int16_t, std::int32_t, std::int64_t, std::int8_t;
using std::uint16_t, std::uint32_t, std::uint64_t, std::uint8_t;
using Xbyak::CodeGenerator;
using Xbyak::Operand;
using Xbyak::Xmm;

using Emit3 = void (CodeGenerator::*)(const Xmm&, const Xmm&, const Operand&);
using Emit2 = void (CodeGenerator::*)(const Xmm&, const Operand&);
using EmitImm = void (CodeGenerator::*)(const Xmm&, const Operand&, std::uint8_t);

class IntegerTest : public EmulatorTest {};

// dst = f(src1, src2) element-wise over T.
template <typename T, typename Fn>
VectorOp binary(const char* name, Emit3 emit, Fn fn, bool broadcast = sizeof(T) >= 4) {
  VectorOp op;
  op.name = name;
  op.element_bytes = sizeof(T);
  op.broadcast_bytes = broadcast ? sizeof(T) : 0;
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*emit)(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  op.reference = [fn](const Inputs& in, unsigned vl) { return map2<T>(in.src1, in.src2, vl, fn); };
  return op;
}

// dst = f(src2) element-wise over T (the source in the src2 slot: register/memory/bcst).
template <typename T, typename Fn>
VectorOp unary(const char* name, Emit2 emit, Fn fn, bool broadcast = sizeof(T) >= 4) {
  VectorOp op;
  op.name = name;
  op.element_bytes = sizeof(T);
  op.broadcast_bytes = broadcast ? sizeof(T) : 0;
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*emit)(o.dst(vl), o.src2(vl));
  };
  op.reference = [fn](const Inputs& in, unsigned vl) { return map1<T>(in.src2, vl, fn); };
  return op;
}

void check(const VectorOp& op, bool native) {
  SCOPED_TRACE(op.name);
  check_vector_op(op);
  if (native) check_against_native(op);
}

TEST_F(IntegerTest, AddSubtractMultiply) {
  auto add = [](auto a, auto b) { return a + b; };
  auto sub = [](auto a, auto b) { return a - b; };
  auto mul = [](auto a, auto b) { return static_cast<uint64_t>(a) * b; };
  check(binary<uint8_t>("vpaddb", &CodeGenerator::vpaddb, add), true);
  check(binary<uint16_t>("vpaddw", &CodeGenerator::vpaddw, add), true);
  check(binary<uint32_t>("vpaddd", &CodeGenerator::vpaddd, add), true);
  check(binary<uint64_t>("vpaddq", &CodeGenerator::vpaddq, add), true);
  check(binary<uint8_t>("vpsubb", &CodeGenerator::vpsubb, sub), true);
  check(binary<uint16_t>("vpsubw", &CodeGenerator::vpsubw, sub), true);
  check(binary<uint32_t>("vpsubd", &CodeGenerator::vpsubd, sub), true);
  check(binary<uint64_t>("vpsubq", &CodeGenerator::vpsubq, sub), true);
  check(binary<uint16_t>("vpmullw", &CodeGenerator::vpmullw, mul), true);
  check(binary<uint32_t>("vpmulld", &CodeGenerator::vpmulld, mul), true);
  check(binary<uint64_t>("vpmullq", &CodeGenerator::vpmullq, mul), false);
}

TEST_F(IntegerTest, BitwiseLogic) {
  auto and_ = [](auto a, auto b) { return a & b; };
  auto andn = [](auto a, auto b) { return ~a & b; };
  auto or_ = [](auto a, auto b) { return a | b; };
  auto xor_ = [](auto a, auto b) { return a ^ b; };
  check(binary<uint32_t>("vpandd", &CodeGenerator::vpandd, and_), false);
  check(binary<uint64_t>("vpandq", &CodeGenerator::vpandq, and_), false);
  check(binary<uint32_t>("vpandnd", &CodeGenerator::vpandnd, andn), false);
  check(binary<uint64_t>("vpandnq", &CodeGenerator::vpandnq, andn), false);
  check(binary<uint32_t>("vpord", &CodeGenerator::vpord, or_), false);
  check(binary<uint64_t>("vporq", &CodeGenerator::vporq, or_), false);
  check(binary<uint32_t>("vpxord", &CodeGenerator::vpxord, xor_), false);
  check(binary<uint64_t>("vpxorq", &CodeGenerator::vpxorq, xor_), false);
}

// Bit j of the result = imm8 bit ((dst_j << 2) | (src1_j << 1) | src2_j).
TEST_F(IntegerTest, TernaryLogic) {
  for (std::uint8_t imm : {0x00, 0x96, 0xE8, 0xCA, 0xFF, 0x3C, 0x81}) {
    for (bool quad : {false, true}) {
      VectorOp op;
      op.name = std::string(quad ? "vpternlogq" : "vpternlogd") + " imm " + std::to_string(imm);
      op.element_bytes = op.broadcast_bytes = quad ? 8 : 4;
      op.emit = [quad, imm](CodeGenerator& g, const Operands& o, unsigned vl) {
        if (quad) {
          g.vpternlogq(o.dst(vl), o.src1(vl), o.src2(vl), imm);
        } else {
          g.vpternlogd(o.dst(vl), o.src1(vl), o.src2(vl), imm);
        }
      };
      op.reference = [imm](const Inputs& in, unsigned vl) {
        Vec512 r;
        for (unsigned byte = 0; byte < vl; ++byte) {
          for (unsigned bit = 0; bit < 8; ++bit) {
            const unsigned index = (((in.dst.bytes[byte] >> bit) & 1) << 2) |
                                   (((in.src1.bytes[byte] >> bit) & 1) << 1) |
                                   ((in.src2.bytes[byte] >> bit) & 1);
            r.bytes[byte] |= static_cast<std::uint8_t>(((imm >> index) & 1) << bit);
          }
        }
        return r;
      };
      check(op, false);
    }
  }
}

template <typename T>
T shift_left(T x, uint64_t n) {
  return n >= sizeof(T) * 8 ? T{0} : static_cast<T>(static_cast<uint64_t>(x) << n);
}
template <typename T>
T shift_right_logical(T x, uint64_t n) {
  return n >= sizeof(T) * 8 ? T{0} : static_cast<T>(static_cast<uint64_t>(x) >> n);
}
template <typename T>
T shift_right_arithmetic(T x, uint64_t n) {
  using S = std::make_signed_t<T>;
  const int64_t value = static_cast<S>(x);
  return static_cast<T>(value >> (n >= sizeof(T) * 8 ? sizeof(T) * 8 - 1 : n));
}

template <typename T>
void check_shift(const char* name, EmitImm by_immediate, Emit3 by_register, T (*fn)(T, uint64_t),
                 bool native) {
  for (std::uint8_t imm : {0, 1, 5, 15, 16, 31, 32, 63, 64, 200}) {
    VectorOp op;
    op.name = std::string(name) + " imm " + std::to_string(imm);
    op.element_bytes = sizeof(T);
    op.broadcast_bytes = sizeof(T) >= 4 ? sizeof(T) : 0;
    op.emit = [by_immediate, imm](CodeGenerator& g, const Operands& o, unsigned vl) {
      (g.*by_immediate)(o.dst(vl), o.src2(vl), imm);
    };
    op.reference = [fn, imm](const Inputs& in, unsigned vl) {
      return map1<T>(in.src2, vl, [fn, imm](T x) { return fn(x, imm); });
    };
    op.native_memory_form = false;  // VEX shifts by imm8 take a register source only
    check(op, native);
  }
  // Count in the low quadword of an xmm / m128: mostly small, sometimes huge.
  VectorOp op;
  op.name = std::string(name) + " xmm count";
  op.element_bytes = sizeof(T);
  op.emit = [by_register](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*by_register)(o.dst(vl), o.src1(vl), o.src2(16));
  };
  op.inputs = [](Random& random) {
    Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
    const uint64_t r = random.next();
    in.src2.set<uint64_t>(0, (r & 3) == 0 ? r : r % (sizeof(T) * 8 + 3));
    return in;
  };
  op.reference = [fn](const Inputs& in, unsigned vl) {
    const uint64_t count = in.src2.get<uint64_t>(0);
    return map1<T>(in.src1, vl, [fn, count](T x) { return fn(x, count); });
  };
  check(op, native);
}

TEST_F(IntegerTest, UniformShifts) {
  check_shift<uint16_t>("vpsllw", &CodeGenerator::vpsllw, &CodeGenerator::vpsllw, shift_left, true);
  check_shift<uint32_t>("vpslld", &CodeGenerator::vpslld, &CodeGenerator::vpslld, shift_left, true);
  check_shift<uint64_t>("vpsllq", &CodeGenerator::vpsllq, &CodeGenerator::vpsllq, shift_left, true);
  check_shift<uint16_t>("vpsrlw", &CodeGenerator::vpsrlw, &CodeGenerator::vpsrlw,
                        shift_right_logical, true);
  check_shift<uint32_t>("vpsrld", &CodeGenerator::vpsrld, &CodeGenerator::vpsrld,
                        shift_right_logical, true);
  check_shift<uint64_t>("vpsrlq", &CodeGenerator::vpsrlq, &CodeGenerator::vpsrlq,
                        shift_right_logical, true);
  check_shift<uint16_t>("vpsraw", &CodeGenerator::vpsraw, &CodeGenerator::vpsraw,
                        shift_right_arithmetic, true);
  check_shift<uint32_t>("vpsrad", &CodeGenerator::vpsrad, &CodeGenerator::vpsrad,
                        shift_right_arithmetic, true);
  check_shift<uint64_t>("vpsraq", &CodeGenerator::vpsraq, &CodeGenerator::vpsraq,
                        shift_right_arithmetic, false);
}

TEST_F(IntegerTest, VariableShifts) {
  auto counts = [](Random& random) {
    Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
    for (unsigned i = 0; i < 64; ++i) in.src2.bytes[i] = static_cast<uint8_t>(random.next() % 70);
    return in;
  };
  auto variable = [&](auto tag, const char* name, Emit3 emit, auto fn, bool native) {
    using T = decltype(tag);
    VectorOp op = binary<T>(name, emit, [fn](T x, T n) { return fn(x, static_cast<uint64_t>(n)); });
    op.inputs = counts;
    check(op, native);
  };
  variable(uint32_t{}, "vpsllvd", &CodeGenerator::vpsllvd, shift_left<uint32_t>, true);
  variable(uint64_t{}, "vpsllvq", &CodeGenerator::vpsllvq, shift_left<uint64_t>, true);
  variable(uint32_t{}, "vpsrlvd", &CodeGenerator::vpsrlvd, shift_right_logical<uint32_t>, true);
  variable(uint64_t{}, "vpsrlvq", &CodeGenerator::vpsrlvq, shift_right_logical<uint64_t>, true);
  variable(uint32_t{}, "vpsravd", &CodeGenerator::vpsravd, shift_right_arithmetic<uint32_t>, true);
}

TEST_F(IntegerTest, MinimumMaximum) {
  auto max = [](auto a, auto b) { return a > b ? a : b; };
  auto min = [](auto a, auto b) { return a < b ? a : b; };
  check(binary<int8_t>("vpmaxsb", &CodeGenerator::vpmaxsb, max), true);
  check(binary<int16_t>("vpmaxsw", &CodeGenerator::vpmaxsw, max), true);
  check(binary<int32_t>("vpmaxsd", &CodeGenerator::vpmaxsd, max), true);
  check(binary<int64_t>("vpmaxsq", &CodeGenerator::vpmaxsq, max), false);
  check(binary<uint8_t>("vpmaxub", &CodeGenerator::vpmaxub, max), true);
  check(binary<uint16_t>("vpmaxuw", &CodeGenerator::vpmaxuw, max), true);
  check(binary<uint32_t>("vpmaxud", &CodeGenerator::vpmaxud, max), true);
  check(binary<uint64_t>("vpmaxuq", &CodeGenerator::vpmaxuq, max), false);
  check(binary<int8_t>("vpminsb", &CodeGenerator::vpminsb, min), true);
  check(binary<int16_t>("vpminsw", &CodeGenerator::vpminsw, min), true);
  check(binary<int32_t>("vpminsd", &CodeGenerator::vpminsd, min), true);
  check(binary<int64_t>("vpminsq", &CodeGenerator::vpminsq, min), false);
  check(binary<uint8_t>("vpminub", &CodeGenerator::vpminub, min), true);
  check(binary<uint16_t>("vpminuw", &CodeGenerator::vpminuw, min), true);
  check(binary<uint32_t>("vpminud", &CodeGenerator::vpminud, min), true);
  check(binary<uint64_t>("vpminuq", &CodeGenerator::vpminuq, min), false);
}

TEST_F(IntegerTest, AbsoluteValue) {
  // |INT_MIN| stays INT_MIN (0x80..): computed in the unsigned type.
  auto abs = [](auto x) {
    using U = std::make_unsigned_t<decltype(x)>;
    return x < 0 ? static_cast<U>(0) - static_cast<U>(x) : static_cast<U>(x);
  };
  check(unary<int8_t>("vpabsb", &CodeGenerator::vpabsb, abs), true);
  check(unary<int16_t>("vpabsw", &CodeGenerator::vpabsw, abs), true);
  check(unary<int32_t>("vpabsd", &CodeGenerator::vpabsd, abs), true);
  check(unary<int64_t>("vpabsq", &CodeGenerator::vpabsq, abs), false);
}

TEST_F(IntegerTest, MultiplyAdd) {
  VectorOp maddubsw;
  maddubsw.name = "vpmaddubsw";
  maddubsw.element_bytes = 2;
  maddubsw.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vpmaddubsw(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  maddubsw.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 2; ++i) {
      int32_t sum = 0;
      for (unsigned j = 0; j < 2; ++j)
        sum += in.src1.get<uint8_t>(2 * i + j) * in.src2.get<int8_t>(2 * i + j);
      r.set<int16_t>(i, static_cast<int16_t>(sum > 32767 ? 32767 : (sum < -32768 ? -32768 : sum)));
    }
    return r;
  };
  check(maddubsw, true);

  VectorOp maddwd;
  maddwd.name = "vpmaddwd";
  maddwd.element_bytes = 4;
  maddwd.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vpmaddwd(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  maddwd.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / 4; ++i) {
      int64_t sum = 0;
      for (unsigned j = 0; j < 2; ++j)
        sum += int64_t{in.src1.get<int16_t>(2 * i + j)} * in.src2.get<int16_t>(2 * i + j);
      r.set<uint32_t>(i, static_cast<uint32_t>(sum));
    }
    return r;
  };
  maddwd.inputs = [](Random& random) {  // include 0x8000 * 0x8000 pairs (the wrapping case)
    Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
    for (unsigned i = 0; i < 32; i += 5)
      in.src1.set<uint16_t>(i, 0x8000), in.src2.set<uint16_t>(i, 0x8000);
    return in;
  };
  check(maddwd, true);
}

template <typename T>
bool compare(unsigned predicate, T a, T b) {
  switch (predicate) {
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
      return !(a < b);
    case 6:
      return !(a <= b);
    default:
      return true;
  }
}

// Inputs with many equal elements, so that EQ / LE / NLT see both outcomes.
Inputs with_ties(Random& random) {
  Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
  for (unsigned i = 0; i < 64; ++i)
    if (random.next() % 3 == 0) in.src2.bytes[i] = in.src1.bytes[i];
  return in;
}

using CompareEmit = void (CodeGenerator::*)(const Xbyak::Opmask&, const Xmm&, const Operand&,
                                            std::uint8_t);

template <typename T>
void check_compare(const char* name, CompareEmit emit) {
  for (unsigned predicate = 0; predicate < 8; ++predicate) {
    CompareOp op;
    op.name = std::string(name) + " predicate " + std::to_string(predicate);
    op.element_bytes = sizeof(T);
    op.broadcast_bytes = sizeof(T) >= 4 ? sizeof(T) : 0;
    op.inputs = with_ties;
    op.emit = [emit, predicate](CodeGenerator& g, const Xbyak::Opmask& k, const Xmm& a,
                                const Operand& b) {
      (g.*emit)(k, a, b, static_cast<std::uint8_t>(predicate));
    };
    op.holds = [predicate](const Inputs& in, unsigned i) {
      return compare<T>(predicate, in.src1.get<T>(i), in.src2.get<T>(i));
    };
    check_compare_op(op);
  }
}

TEST_F(IntegerTest, ComparesIntoOpmask) {
  check_compare<int8_t>("vpcmpb", &CodeGenerator::vpcmpb);
  check_compare<uint8_t>("vpcmpub", &CodeGenerator::vpcmpub);
  check_compare<int16_t>("vpcmpw", &CodeGenerator::vpcmpw);
  check_compare<uint16_t>("vpcmpuw", &CodeGenerator::vpcmpuw);
  check_compare<int32_t>("vpcmpd", &CodeGenerator::vpcmpd);
  check_compare<uint32_t>("vpcmpud", &CodeGenerator::vpcmpud);
  check_compare<int64_t>("vpcmpq", &CodeGenerator::vpcmpq);
  check_compare<uint64_t>("vpcmpuq", &CodeGenerator::vpcmpuq);
}

using CompareFixedEmit = void (CodeGenerator::*)(const Xbyak::Opmask&, const Xmm&, const Operand&);

template <typename T>
void check_fixed_compare(const char* name, CompareFixedEmit emit, unsigned predicate) {
  CompareOp op;
  op.name = name;
  op.element_bytes = sizeof(T);
  op.broadcast_bytes = sizeof(T) >= 4 ? sizeof(T) : 0;
  op.inputs = with_ties;
  op.emit = [emit](CodeGenerator& g, const Xbyak::Opmask& k, const Xmm& a, const Operand& b) {
    (g.*emit)(k, a, b);
  };
  op.holds = [predicate](const Inputs& in, unsigned i) {
    return compare<T>(predicate, in.src1.get<T>(i), in.src2.get<T>(i));
  };
  check_compare_op(op);
}

TEST_F(IntegerTest, EqualAndGreaterIntoOpmask) {
  check_fixed_compare<int8_t>("vpcmpeqb", &CodeGenerator::vpcmpeqb, 0);
  check_fixed_compare<int16_t>("vpcmpeqw", &CodeGenerator::vpcmpeqw, 0);
  check_fixed_compare<int32_t>("vpcmpeqd", &CodeGenerator::vpcmpeqd, 0);
  check_fixed_compare<int64_t>("vpcmpeqq", &CodeGenerator::vpcmpeqq, 0);
  check_fixed_compare<int8_t>("vpcmpgtb", &CodeGenerator::vpcmpgtb, 6);
  check_fixed_compare<int16_t>("vpcmpgtw", &CodeGenerator::vpcmpgtw, 6);
  check_fixed_compare<int32_t>("vpcmpgtd", &CodeGenerator::vpcmpgtd, 6);
  check_fixed_compare<int64_t>("vpcmpgtq", &CodeGenerator::vpcmpgtq, 6);
}

template <typename T>
VectorOp blend(const char* name, Emit3 emit) {
  VectorOp op = binary<T>(name, emit, [](T, T b) { return b; });
  op.opmask_selects = true;
  op.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / sizeof(T); ++i) {
      const bool take_src2 = in.masking == Masking::kNone || ((in.mask >> i) & 1);
      if (take_src2) {
        r.set<T>(i, in.src2.get<T>(i));
      } else if (in.masking == Masking::kMerge) {
        r.set<T>(i, in.src1.get<T>(i));
      }
    }
    return r;
  };
  return op;
}

TEST_F(IntegerTest, BlendByOpmask) {
  check(blend<uint8_t>("vpblendmb", &CodeGenerator::vpblendmb), false);
  check(blend<uint16_t>("vpblendmw", &CodeGenerator::vpblendmw), false);
  check(blend<uint32_t>("vpblendmd", &CodeGenerator::vpblendmd), false);
  check(blend<uint64_t>("vpblendmq", &CodeGenerator::vpblendmq), false);
}

}  // namespace
}  // namespace qforge::emulate::test
