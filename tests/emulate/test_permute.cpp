// Rearrangement: byte shuffles, permutes (one and two tables), unpacks, dword and block
// shuffles, packs, widening and narrowing moves (to registers and, masked, to memory).
#include <cstdint>
#include <limits>

#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

using std::int16_t, std::int32_t, std::int64_t, std::int8_t;
using std::uint16_t, std::uint32_t, std::uint64_t, std::uint8_t;
using Xbyak::CodeGenerator;
using Xbyak::Operand;
using Xbyak::Xmm;
namespace reg = Xbyak::util;

using Emit3 = void (CodeGenerator::*)(const Xmm&, const Xmm&, const Operand&);
using Emit2 = void (CodeGenerator::*)(const Xmm&, const Operand&);
using EmitNarrow = void (CodeGenerator::*)(const Operand&, const Xmm&);

class PermuteTest : public EmulatorTest {};

void check(const VectorOp& op, bool native) {
  SCOPED_TRACE(op.name);
  check_vector_op(op);
  if (native) check_against_native(op);
}

VectorOp three_operand(const char* name, Emit3 emit, unsigned element, unsigned broadcast) {
  VectorOp op;
  op.name = name;
  op.element_bytes = element;
  op.broadcast_bytes = broadcast;
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*emit)(o.dst(vl), o.src1(vl), o.src2(vl));
  };
  return op;
}

TEST_F(PermuteTest, ShuffleBytesWithinLanes) {
  VectorOp op = three_operand("vpshufb", &CodeGenerator::vpshufb, 1, 0);
  op.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl; ++i) {
      const uint8_t control = in.src2.bytes[i];
      r.bytes[i] = (control & 0x80) ? 0 : in.src1.bytes[(i / 16) * 16 + (control & 15)];
    }
    return r;
  };
  check(op, true);
}

template <typename T>
VectorOp permute(const char* name, Emit3 emit, std::vector<unsigned> lengths) {
  VectorOp op = three_operand(name, emit, sizeof(T), sizeof(T) >= 4 ? sizeof(T) : 0);
  op.lengths = std::move(lengths);
  op.reference = [](const Inputs& in, unsigned vl) {
    const unsigned n = vl / sizeof(T);
    Vec512 r;
    for (unsigned i = 0; i < n; ++i) r.set<T>(i, in.src2.get<T>(in.src1.get<T>(i) % n));
    return r;
  };
  return op;
}

TEST_F(PermuteTest, PermuteOneTable) {
  VectorOp vpermd = permute<uint32_t>("vpermd", nullptr, {32, 64});
  vpermd.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vpermd(o.dst_wide(vl), o.src1_wide(vl), o.src2(vl));
  };
  check(vpermd, true);
  VectorOp vpermps = permute<uint32_t>("vpermps", nullptr, {32, 64});
  vpermps.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vpermps(o.dst_wide(vl), o.src1_wide(vl), o.src2(vl));
  };
  check(vpermps, true);
  check(permute<uint16_t>("vpermw", &CodeGenerator::vpermw, {16, 32, 64}), false);
}

// Two tables of n elements: index bit log2(n) picks the table, the lower bits the element.
template <typename T>
T pick(const Vec512& first, const Vec512& second, uint64_t index, unsigned n) {
  return (index & n) ? second.get<T>(index % n) : first.get<T>(index % n);
}

template <typename T>
VectorOp permute_two_tables(const char* name, Emit3 emit, bool index_in_destination) {
  VectorOp op = three_operand(name, emit, sizeof(T), sizeof(T) >= 4 ? sizeof(T) : 0);
  op.reference = [index_in_destination](const Inputs& in, unsigned vl) {
    const unsigned n = vl / sizeof(T);
    Vec512 r;
    for (unsigned i = 0; i < n; ++i) {
      const T index = index_in_destination ? in.dst.get<T>(i) : in.src1.get<T>(i);
      const Vec512& first = index_in_destination ? in.src1 : in.dst;
      r.set<T>(i, pick<T>(first, in.src2, static_cast<std::make_unsigned_t<T>>(index), n));
    }
    return r;
  };
  return op;
}

TEST_F(PermuteTest, PermuteTwoTables) {
  check(permute_two_tables<uint16_t>("vpermt2w", &CodeGenerator::vpermt2w, false), false);
  check(permute_two_tables<uint32_t>("vpermt2d", &CodeGenerator::vpermt2d, false), false);
  check(permute_two_tables<uint32_t>("vpermt2ps", &CodeGenerator::vpermt2ps, false), false);
  check(permute_two_tables<uint64_t>("vpermt2q", &CodeGenerator::vpermt2q, false), false);
  check(permute_two_tables<uint64_t>("vpermt2pd", &CodeGenerator::vpermt2pd, false), false);
  check(permute_two_tables<uint32_t>("vpermi2d", &CodeGenerator::vpermi2d, true), false);
  check(permute_two_tables<uint32_t>("vpermi2ps", &CodeGenerator::vpermi2ps, true), false);
}

template <typename T>
VectorOp unpack(const char* name, Emit3 emit, bool high) {
  VectorOp op = three_operand(name, emit, sizeof(T), sizeof(T) >= 4 ? sizeof(T) : 0);
  op.reference = [high](const Inputs& in, unsigned vl) {
    const unsigned per_lane = 16 / sizeof(T);
    Vec512 r;
    for (unsigned lane = 0; lane < vl / 16; ++lane)
      for (unsigned j = 0; j < per_lane / 2; ++j) {
        const unsigned from = lane * per_lane + (high ? per_lane / 2 : 0) + j;
        r.set<T>(lane * per_lane + 2 * j, in.src1.get<T>(from));
        r.set<T>(lane * per_lane + 2 * j + 1, in.src2.get<T>(from));
      }
    return r;
  };
  return op;
}

TEST_F(PermuteTest, Unpack) {
  check(unpack<uint8_t>("vpunpcklbw", &CodeGenerator::vpunpcklbw, false), true);
  check(unpack<uint8_t>("vpunpckhbw", &CodeGenerator::vpunpckhbw, true), true);
  check(unpack<uint16_t>("vpunpcklwd", &CodeGenerator::vpunpcklwd, false), true);
  check(unpack<uint16_t>("vpunpckhwd", &CodeGenerator::vpunpckhwd, true), true);
  check(unpack<uint32_t>("vpunpckldq", &CodeGenerator::vpunpckldq, false), true);
  check(unpack<uint32_t>("vpunpckhdq", &CodeGenerator::vpunpckhdq, true), true);
  check(unpack<uint64_t>("vpunpcklqdq", &CodeGenerator::vpunpcklqdq, false), true);
  check(unpack<uint64_t>("vpunpckhqdq", &CodeGenerator::vpunpckhqdq, true), true);
}

TEST_F(PermuteTest, ShuffleDwordsWithinLanes) {
  for (std::uint8_t imm : {0x00, 0x1B, 0xE4, 0x4E, 0xB1, 0x93}) {
    VectorOp op;
    op.name = "vpshufd imm " + std::to_string(imm);
    op.element_bytes = op.broadcast_bytes = 4;
    op.emit = [imm](CodeGenerator& g, const Operands& o, unsigned vl) {
      g.vpshufd(o.dst(vl), o.src2(vl), imm);
    };
    op.reference = [imm](const Inputs& in, unsigned vl) {
      Vec512 r;
      for (unsigned i = 0; i < vl / 4; ++i)
        r.set<uint32_t>(i, in.src2.get<uint32_t>((i & ~3u) + ((imm >> (2 * (i & 3))) & 3)));
      return r;
    };
    check(op, true);
  }
}

TEST_F(PermuteTest, ShuffleBlocks) {
  using EmitBlocks =
      void (CodeGenerator::*)(const Xbyak::Ymm&, const Xbyak::Ymm&, const Operand&, std::uint8_t);
  struct Case {
    const char* name;
    EmitBlocks emit;
    unsigned element;
  };
  const Case cases[] = {
      {"vshufi32x4", &CodeGenerator::vshufi32x4, 4},
      {"vshuff32x4", &CodeGenerator::vshuff32x4, 4},
      {"vshufi64x2", &CodeGenerator::vshufi64x2, 8},
      {"vshuff64x2", &CodeGenerator::vshuff64x2, 8},
  };
  for (const Case& c : cases) {
    for (std::uint8_t imm : {0x00, 0x1B, 0xE4, 0x4E, 0xB1, 0x03, 0x02}) {
      VectorOp op;
      op.name = std::string(c.name) + " imm " + std::to_string(imm);
      op.element_bytes = op.broadcast_bytes = c.element;
      op.lengths = {32, 64};
      op.emit = [&c, imm](CodeGenerator& g, const Operands& o, unsigned vl) {
        (g.*c.emit)(o.dst_wide(vl), o.src1_wide(vl), o.src2(vl), imm);
      };
      op.reference = [imm](const Inputs& in, unsigned vl) {
        const unsigned blocks = vl / 16, bits = blocks == 4 ? 2 : 1;
        Vec512 r;
        for (unsigned b = 0; b < blocks; ++b) {
          const unsigned pick = (imm >> (bits * b)) & ((1u << bits) - 1);
          const Vec512& from = b < blocks / 2 ? in.src1 : in.src2;
          std::memcpy(r.bytes + 16 * b, from.bytes + 16 * pick, 16);
        }
        return r;
      };
      check(op, false);
    }
  }
}

template <typename T>
T clamp(int64_t v) {
  const int64_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  return static_cast<T>(v < lo ? lo : (v > hi ? hi : v));
}

template <typename From, typename To>
VectorOp pack(const char* name, Emit3 emit) {
  VectorOp op = three_operand(name, emit, sizeof(To), sizeof(From) == 4 ? 4 : 0);
  op.reference = [](const Inputs& in, unsigned vl) {
    const unsigned per_lane = 16 / sizeof(From);
    Vec512 r;
    for (unsigned lane = 0; lane < vl / 16; ++lane)
      for (unsigned j = 0; j < per_lane; ++j) {
        r.set<To>(lane * 2 * per_lane + j, clamp<To>(in.src1.get<From>(lane * per_lane + j)));
        r.set<To>(lane * 2 * per_lane + per_lane + j,
                  clamp<To>(in.src2.get<From>(lane * per_lane + j)));
      }
    return r;
  };
  // Values near the limits of To, so that both saturation ends are hit.
  op.inputs = [](Random& random) {
    Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
    for (unsigned i = 0; i < 64 / sizeof(From); ++i) {
      const int64_t span = int64_t{std::numeric_limits<To>::max()} * 3;
      in.src1.set<From>(i,
                        static_cast<From>(static_cast<int64_t>(random.next() % (2 * span)) - span));
      in.src2.set<From>(i,
                        static_cast<From>(static_cast<int64_t>(random.next() % (2 * span)) - span));
    }
    return in;
  };
  return op;
}

TEST_F(PermuteTest, PackWithSaturation) {
  check(pack<int32_t, int16_t>("vpackssdw", &CodeGenerator::vpackssdw), true);
  check(pack<int32_t, uint16_t>("vpackusdw", &CodeGenerator::vpackusdw), true);
  check(pack<int16_t, int8_t>("vpacksswb", &CodeGenerator::vpacksswb), true);
  check(pack<int16_t, uint8_t>("vpackuswb", &CodeGenerator::vpackuswb), true);
}

template <typename From, typename To>
VectorOp widen(const char* name, Emit2 emit) {
  VectorOp op;
  op.name = name;
  op.element_bytes = sizeof(To);
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*emit)(o.dst(vl), o.src2(vl * sizeof(From) / sizeof(To)));
  };
  op.reference = [](const Inputs& in, unsigned vl) {
    Vec512 r;
    for (unsigned i = 0; i < vl / sizeof(To); ++i)
      r.set<To>(i, static_cast<To>(in.src2.get<From>(i)));
    return r;
  };
  return op;
}

TEST_F(PermuteTest, Widen) {
  check(widen<uint8_t, uint16_t>("vpmovzxbw", &CodeGenerator::vpmovzxbw), true);
  check(widen<uint8_t, uint32_t>("vpmovzxbd", &CodeGenerator::vpmovzxbd), true);
  check(widen<uint8_t, uint64_t>("vpmovzxbq", &CodeGenerator::vpmovzxbq), true);
  check(widen<uint16_t, uint32_t>("vpmovzxwd", &CodeGenerator::vpmovzxwd), true);
  check(widen<uint16_t, uint64_t>("vpmovzxwq", &CodeGenerator::vpmovzxwq), true);
  check(widen<uint32_t, uint64_t>("vpmovzxdq", &CodeGenerator::vpmovzxdq), true);
  check(widen<int8_t, int16_t>("vpmovsxbw", &CodeGenerator::vpmovsxbw), true);
  check(widen<int8_t, int32_t>("vpmovsxbd", &CodeGenerator::vpmovsxbd), true);
  check(widen<int8_t, int64_t>("vpmovsxbq", &CodeGenerator::vpmovsxbq), true);
  check(widen<int16_t, int32_t>("vpmovsxwd", &CodeGenerator::vpmovsxwd), true);
  check(widen<int16_t, int64_t>("vpmovsxwq", &CodeGenerator::vpmovsxwq), true);
  check(widen<int32_t, int64_t>("vpmovsxdq", &CodeGenerator::vpmovsxdq), true);
}

enum class Narrowing { kTruncate, kSigned, kUnsigned };

template <typename From, typename To>
To narrow_value(From x, Narrowing how) {
  using SFrom = std::make_signed_t<From>;
  using STo = std::make_signed_t<To>;
  if (how == Narrowing::kTruncate) return static_cast<To>(x);
  if (how == Narrowing::kSigned) return static_cast<To>(clamp<STo>(static_cast<SFrom>(x)));
  const uint64_t u = static_cast<std::make_unsigned_t<From>>(x);
  return static_cast<To>(u > std::numeric_limits<To>::max() ? std::numeric_limits<To>::max() : u);
}

template <typename From, typename To>
Vec512 narrow_reference(const Vec512& source, unsigned vl, Narrowing how) {
  Vec512 r;
  for (unsigned i = 0; i < vl / sizeof(From); ++i)
    r.set<To>(i, narrow_value<From, To>(source.get<From>(i), how));
  return r;
}

// Sources near the limits of To (and beyond), for saturation.
template <typename From, typename To>
Inputs narrowing_inputs(Random& random) {
  Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
  const int64_t span =
      static_cast<int64_t>(std::numeric_limits<std::make_unsigned_t<To>>::max()) * 2;
  for (unsigned i = 0; i < 64 / sizeof(From); ++i)
    if (random.next() % 4)
      in.src1.set<From>(i,
                        static_cast<From>(static_cast<int64_t>(random.next() % (2 * span)) - span));
  return in;
}

template <typename From, typename To>
void check_narrow(const char* name, EmitNarrow emit, Narrowing how) {
  VectorOp op;
  op.name = name;
  op.element_bytes = sizeof(To);
  op.memory_form = false;
  op.inputs = narrowing_inputs<From, To>;
  op.result_bytes = [](unsigned vl) { return vl * sizeof(To) / sizeof(From); };
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    const unsigned out = vl * sizeof(To) / sizeof(From);
    (g.*emit)(o.dst(out < 16 ? 16 : out), o.src1(vl));
  };
  op.reference = [how](const Inputs& in, unsigned vl) {
    return narrow_reference<From, To>(in.src1, vl, how);
  };
  SCOPED_TRACE(name);
  check_vector_op(op);

  // To memory under a mask: only the selected elements are written.
  for (unsigned vl : {16u, 32u, 64u}) {
    Jit jit;
    jit.vmovdqu32(reg::zmm17, jit.ptr[reg::rdi]);
    jit.kmovq(reg::k1, jit.ptr[reg::rdi + 64]);
    (jit.*emit)(jit.ptr[reg::rsi] | reg::k1, vector_register(17, vl));
    Random random(vl);
    const Inputs in = narrowing_inputs<From, To>(random);
    alignas(64) Vec512 input[2] = {in.src1, random.bytes()};
    alignas(64) Vec512 memory = random.bytes();
    Vec512 expected = memory;
    const Vec512 narrowed = narrow_reference<From, To>(in.src1, vl, how);
    const uint64_t mask = input[1].get<uint64_t>(0);
    for (unsigned e = 0; e < vl / sizeof(From); ++e)
      if ((mask >> e) & 1) expected.set<To>(e, narrowed.get<To>(e));
    jit.run(input, &memory);
    EXPECT_EQ(hex(memory, 64, sizeof(To)), hex(expected, 64, sizeof(To)))
        << name << " to memory vl=" << vl * 8;
  }
}

TEST_F(PermuteTest, Narrow) {
  check_narrow<uint16_t, uint8_t>("vpmovwb", &CodeGenerator::vpmovwb, Narrowing::kTruncate);
  check_narrow<uint16_t, uint8_t>("vpmovswb", &CodeGenerator::vpmovswb, Narrowing::kSigned);
  check_narrow<uint16_t, uint8_t>("vpmovuswb", &CodeGenerator::vpmovuswb, Narrowing::kUnsigned);
  check_narrow<uint32_t, uint8_t>("vpmovdb", &CodeGenerator::vpmovdb, Narrowing::kTruncate);
  check_narrow<uint32_t, uint8_t>("vpmovsdb", &CodeGenerator::vpmovsdb, Narrowing::kSigned);
  check_narrow<uint32_t, uint8_t>("vpmovusdb", &CodeGenerator::vpmovusdb, Narrowing::kUnsigned);
  check_narrow<uint32_t, uint16_t>("vpmovdw", &CodeGenerator::vpmovdw, Narrowing::kTruncate);
  check_narrow<uint32_t, uint16_t>("vpmovsdw", &CodeGenerator::vpmovsdw, Narrowing::kSigned);
  check_narrow<uint32_t, uint16_t>("vpmovusdw", &CodeGenerator::vpmovusdw, Narrowing::kUnsigned);
  check_narrow<uint64_t, uint8_t>("vpmovqb", &CodeGenerator::vpmovqb, Narrowing::kTruncate);
  check_narrow<uint64_t, uint16_t>("vpmovqw", &CodeGenerator::vpmovqw, Narrowing::kTruncate);
  check_narrow<uint64_t, uint32_t>("vpmovqd", &CodeGenerator::vpmovqd, Narrowing::kTruncate);
  check_narrow<uint64_t, uint32_t>("vpmovsqd", &CodeGenerator::vpmovsqd, Narrowing::kSigned);
  check_narrow<uint64_t, uint32_t>("vpmovusqd", &CodeGenerator::vpmovusqd, Narrowing::kUnsigned);
}

}  // namespace
}  // namespace qforge::emulate::test
