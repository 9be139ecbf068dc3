// VNNI dot products: AVX512-VNNI (EVEX: all lengths, masking, {1to16}) and AVX-VNNI (VEX
// xmm/ymm), against the SDM definition; saturating forms on inputs that saturate.
#include <cstdint>
#include <limits>

#include "jit/emulate/emulator.h"
#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

using Xbyak::CodeGenerator;

std::int32_t finish(std::int64_t sum, bool saturating) {
  if (!saturating) return static_cast<std::int32_t>(static_cast<std::uint32_t>(sum));
  const std::int64_t lo = std::numeric_limits<std::int32_t>::min();
  const std::int64_t hi = std::numeric_limits<std::int32_t>::max();
  return static_cast<std::int32_t>(sum < lo ? lo : (sum > hi ? hi : sum));
}

// dword i += sum_j u8(a.byte[4i+j]) * s8(b.byte[4i+j])
Vec512 reference_bytes(const Inputs& in, unsigned vl, bool saturating) {
  Vec512 r;
  for (unsigned i = 0; i < vl / 4; ++i) {
    std::int64_t sum = in.dst.get<std::int32_t>(i);
    for (unsigned j = 0; j < 4; ++j)
      sum +=
          std::int64_t{in.src1.get<std::uint8_t>(4 * i + j)} * in.src2.get<std::int8_t>(4 * i + j);
    r.set<std::int32_t>(i, finish(sum, saturating));
  }
  return r;
}

// dword i += sum_j s16(a.word[2i+j]) * s16(b.word[2i+j])
Vec512 reference_words(const Inputs& in, unsigned vl, bool saturating) {
  Vec512 r;
  for (unsigned i = 0; i < vl / 4; ++i) {
    std::int64_t sum = in.dst.get<std::int32_t>(i);
    for (unsigned j = 0; j < 2; ++j)
      sum +=
          std::int64_t{in.src1.get<std::int16_t>(2 * i + j)} * in.src2.get<std::int16_t>(2 * i + j);
    r.set<std::int32_t>(i, finish(sum, saturating));
  }
  return r;
}

// Accumulators near the int32 limits so that the saturating forms saturate.
Inputs near_limits(Random& random) {
  Inputs in{random.bytes(), random.bytes(), random.bytes(), 0};
  for (unsigned i = 0; i < 16; ++i) {
    const std::uint32_t offset = static_cast<std::uint32_t>(random.next() % 70000);
    in.dst.set<std::uint32_t>(i, (i & 1) ? 0x7FFFFFFFu - offset : 0x80000000u + offset);
  }
  return in;
}

using EmitFn = void (CodeGenerator::*)(const Xbyak::Xmm&, const Xbyak::Xmm&, const Xbyak::Operand&,
                                       Xbyak::PreferredEncoding);

struct VnniCase {
  const char* name;
  EmitFn emit;
  bool words;
  bool saturating;
};

constexpr VnniCase kCases[] = {
    {"vpdpbusd", &CodeGenerator::vpdpbusd, false, false},
    {"vpdpbusds", &CodeGenerator::vpdpbusds, false, true},
    {"vpdpwssd", &CodeGenerator::vpdpwssd, true, false},
    {"vpdpwssds", &CodeGenerator::vpdpwssds, true, true},
};

VectorOp evex_op(const VnniCase& c, bool limits) {
  VectorOp op;
  op.name = c.name;
  op.element_bytes = 4;
  op.broadcast_bytes = 4;
  op.emit = [c](CodeGenerator& g, const Operands& o, unsigned vl) {
    (g.*c.emit)(o.dst(vl), o.src1(vl), o.src2(vl), Xbyak::EvexEncoding);
  };
  op.reference = [c](const Inputs& in, unsigned vl) {
    return c.words ? reference_words(in, vl, c.saturating) : reference_bytes(in, vl, c.saturating);
  };
  if (limits) op.inputs = near_limits;
  return op;
}

class VnniTest : public EmulatorTest {};

TEST_F(VnniTest, Avx512VnniAllForms) {
  for (const VnniCase& c : kCases) {
    SCOPED_TRACE(c.name);
    check_vector_op(evex_op(c, false));
  }
}

TEST_F(VnniTest, Avx512VnniSaturatesAtInt32Limits) {
  for (const VnniCase& c : kCases) {
    SCOPED_TRACE(c.name);
    check_vector_op(evex_op(c, true));
  }
}

// VEX-encoded AVX-VNNI on xmm/ymm 0..15, register and memory sources; the write zeroes
// the destination above its length (bits 511:128 or 511:256).
TEST_F(VnniTest, AvxVnniVexForms) {
  using namespace Xbyak::util;
  for (const VnniCase& c : kCases) {
    for (unsigned vl : {16u, 32u}) {
      for (bool memory : {false, true}) {
        for (bool limits : {false, true}) {
          Jit jit;
          jit.vmovdqu32(zmm3, jit.ptr[rdi]);  // zmm3 all 512 bits set, then overwritten by VEX
          jit.vmovdqu(ymm4, jit.ptr[rdi + 64]);
          jit.vmovdqu(ymm5, jit.ptr[rdi + 128]);
          const Xbyak::Xmm d = vector_register(3, vl), a = vector_register(4, vl);
          if (memory) {
            (jit.*c.emit)(d, a, jit.ptr[rdi + 128], Xbyak::VexEncoding);
          } else {
            (jit.*c.emit)(d, a, vector_register(5, vl), Xbyak::VexEncoding);
          }
          jit.vmovdqu32(jit.ptr[rsi], zmm3);
          for (int seed = 1; seed <= 3; ++seed) {
            Random random(seed);
            Inputs in = limits ? near_limits(random)
                               : Inputs{random.bytes(), random.bytes(), random.bytes(), 0};
            alignas(64) Vec512 block[3] = {in.dst, in.src1, in.src2};
            Vec512 actual;
            jit.run(block, &actual);
            Vec512 expected = c.words ? reference_words(in, vl, c.saturating)
                                      : reference_bytes(in, vl, c.saturating);
            EXPECT_EQ(hex(actual), hex(expected))
                << c.name << " VEX vl=" << vl * 8 << (memory ? " memory" : " register");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace qforge::emulate::test
