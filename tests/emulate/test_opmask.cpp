// VEX opmask instructions: kmov in all directions and widths (zero-extension), logic,
// add, not, shifts, unpack (k destinations zeroed above the width), and the RFLAGS that
// kortest / ktest set; opmasks computed this way then mask an EVEX instruction.
#include <cstdint>

#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

using std::uint64_t;
using Xbyak::CodeGenerator;
using Xbyak::Opmask;
namespace reg = Xbyak::util;

class OpmaskTest : public EmulatorTest {};

uint64_t width_mask(unsigned width) {
  return width == 64 ? ~uint64_t{0} : (uint64_t{1} << width) - 1;
}

// Inputs rdi -> {a, b, stale}; k1 = a, k2 = b, k3 = stale (to be overwritten).
void load_opmasks(Jit& jit) {
  jit.kmovq(reg::k1, jit.ptr[reg::rdi]);
  jit.kmovq(reg::k2, jit.ptr[reg::rdi + 8]);
  jit.kmovq(reg::k3, jit.ptr[reg::rdi + 16]);
}

TEST_F(OpmaskTest, MovesInAllWidthsAndDirections) {
  using namespace reg;
  struct Width {
    unsigned bits;
    void (CodeGenerator::*to_k)(const Opmask&, const Xbyak::Operand&);
    void (CodeGenerator::*to_memory)(const Xbyak::Address&, const Opmask&);
    void (CodeGenerator::*k_from_gpr)(const Opmask&, const Xbyak::Reg32&);
    void (CodeGenerator::*gpr_from_k)(const Xbyak::Reg32&, const Opmask&);
  };
  const Width widths[] = {
      {8, &CodeGenerator::kmovb, &CodeGenerator::kmovb, &CodeGenerator::kmovb,
       &CodeGenerator::kmovb},
      {16, &CodeGenerator::kmovw, &CodeGenerator::kmovw, &CodeGenerator::kmovw,
       &CodeGenerator::kmovw},
      {32, &CodeGenerator::kmovd, &CodeGenerator::kmovd, &CodeGenerator::kmovd,
       &CodeGenerator::kmovd},
  };
  for (const Width& w : widths) {
    Jit jit;
    load_opmasks(jit);
    (jit.*w.to_k)(k4, jit.ptr[rdi]);  // k <- memory
    jit.kmovq(jit.ptr[rsi], k4);
    jit.mov(rax, jit.qword[rdi + 8]);
    (jit.*w.k_from_gpr)(k5, eax);  // k <- gpr
    jit.kmovq(jit.ptr[rsi + 8], k5);
    jit.mov(rcx, -1);
    (jit.*w.gpr_from_k)(ecx, k3);  // gpr <- k
    jit.mov(jit.qword[rsi + 16], rcx);
    jit.mov(rdx, jit.qword[rdi + 24]);
    jit.mov(jit.qword[rsi + 24], rdx);
    (jit.*w.to_memory)(jit.ptr[rsi + 24], k3);  // memory <- k (only `bits` bits)
    (jit.*w.to_k)(k6, k3);                      // k <- k
    jit.kmovq(jit.ptr[rsi + 32], k6);
    Random random(w.bits);
    uint64_t in[4] = {random.next(), random.next(), random.next(), random.next()};
    uint64_t out[5] = {};
    jit.run(in, out);
    const uint64_t m = width_mask(w.bits);
    EXPECT_EQ(out[0], in[0] & m) << w.bits << "-bit k <- memory";
    EXPECT_EQ(out[1], in[1] & m) << w.bits << "-bit k <- r32";
    EXPECT_EQ(out[2], in[2] & m) << w.bits << "-bit r32 <- k (zero-extended to 64 bits)";
    EXPECT_EQ(out[3], (in[3] & ~m) | (in[2] & m)) << w.bits << "-bit memory <- k";
    EXPECT_EQ(out[4], in[2] & m) << w.bits << "-bit k <- k";
  }
  Jit jit;  // 64-bit: k <- r64, r64 <- k, k <- k
  jit.mov(rax, jit.qword[rdi]);
  jit.kmovq(k4, rax);
  jit.kmovq(k5, k4);
  jit.kmovq(rcx, k5);
  jit.mov(jit.qword[rsi], rcx);
  uint64_t in = 0x8123456789ABCDEFu, out = 0;
  jit.run(&in, &out);
  EXPECT_EQ(out, in);
}

enum class Logic { kAnd, kAndNot, kOr, kXor, kXnor, kAdd };
using KOp3 = void (CodeGenerator::*)(const Opmask&, const Opmask&, const Opmask&);

uint64_t logic(Logic op, uint64_t a, uint64_t b) {
  switch (op) {
    case Logic::kAnd:
      return a & b;
    case Logic::kAndNot:
      return ~a & b;
    case Logic::kOr:
      return a | b;
    case Logic::kXor:
      return a ^ b;
    case Logic::kXnor:
      return ~(a ^ b);
    default:
      return a + b;
  }
}

void check_three_operand(const char* name, KOp3 emit, unsigned width, Logic op) {
  Jit jit;
  load_opmasks(jit);
  (jit.*emit)(reg::k3, reg::k1, reg::k2);
  jit.kmovq(jit.ptr[reg::rsi], reg::k3);
  for (int seed = 1; seed <= 4; ++seed) {
    Random random(seed);
    uint64_t in[3] = {random.next(), random.next(), random.next()}, out = 0;
    if (seed == 4) in[0] = in[1] = ~uint64_t{0};  // kadd carries out of the width
    jit.run(in, &out);
    EXPECT_EQ(out, logic(op, in[0], in[1]) & width_mask(width)) << name;
  }
}

TEST_F(OpmaskTest, LogicAndAdd) {
  struct Case {
    const char* name;
    KOp3 emit;
    unsigned width;
    Logic op;
  };
  const Case cases[] = {
      {"kandb", &CodeGenerator::kandb, 8, Logic::kAnd},
      {"kandw", &CodeGenerator::kandw, 16, Logic::kAnd},
      {"kandd", &CodeGenerator::kandd, 32, Logic::kAnd},
      {"kandq", &CodeGenerator::kandq, 64, Logic::kAnd},
      {"kandnb", &CodeGenerator::kandnb, 8, Logic::kAndNot},
      {"kandnw", &CodeGenerator::kandnw, 16, Logic::kAndNot},
      {"kandnd", &CodeGenerator::kandnd, 32, Logic::kAndNot},
      {"kandnq", &CodeGenerator::kandnq, 64, Logic::kAndNot},
      {"korb", &CodeGenerator::korb, 8, Logic::kOr},
      {"korw", &CodeGenerator::korw, 16, Logic::kOr},
      {"kord", &CodeGenerator::kord, 32, Logic::kOr},
      {"korq", &CodeGenerator::korq, 64, Logic::kOr},
      {"kxorb", &CodeGenerator::kxorb, 8, Logic::kXor},
      {"kxorw", &CodeGenerator::kxorw, 16, Logic::kXor},
      {"kxord", &CodeGenerator::kxord, 32, Logic::kXor},
      {"kxorq", &CodeGenerator::kxorq, 64, Logic::kXor},
      {"kxnorb", &CodeGenerator::kxnorb, 8, Logic::kXnor},
      {"kxnorw", &CodeGenerator::kxnorw, 16, Logic::kXnor},
      {"kxnord", &CodeGenerator::kxnord, 32, Logic::kXnor},
      {"kxnorq", &CodeGenerator::kxnorq, 64, Logic::kXnor},
      {"kaddb", &CodeGenerator::kaddb, 8, Logic::kAdd},
      {"kaddw", &CodeGenerator::kaddw, 16, Logic::kAdd},
      {"kaddd", &CodeGenerator::kaddd, 32, Logic::kAdd},
      {"kaddq", &CodeGenerator::kaddq, 64, Logic::kAdd},
  };
  for (const Case& c : cases) check_three_operand(c.name, c.emit, c.width, c.op);
}

TEST_F(OpmaskTest, NotShiftUnpack) {
  using KOp2 = void (CodeGenerator::*)(const Opmask&, const Opmask&);
  using KShift = void (CodeGenerator::*)(const Opmask&, const Opmask&, std::uint8_t);
  const struct {
    KOp2 emit;
    unsigned width;
  } nots[] = {{&CodeGenerator::knotb, 8},
              {&CodeGenerator::knotw, 16},
              {&CodeGenerator::knotd, 32},
              {&CodeGenerator::knotq, 64}};
  for (const auto& c : nots) {
    Jit jit;
    load_opmasks(jit);
    (jit.*c.emit)(reg::k3, reg::k1);
    jit.kmovq(jit.ptr[reg::rsi], reg::k3);
    Random random(c.width);
    uint64_t in[3] = {random.next(), random.next(), random.next()}, out = 0;
    jit.run(in, &out);
    EXPECT_EQ(out, ~in[0] & width_mask(c.width)) << "knot width " << c.width;
  }
  const struct {
    KShift emit;
    unsigned width;
    bool left;
  } shifts[] = {{&CodeGenerator::kshiftlb, 8, true},   {&CodeGenerator::kshiftlw, 16, true},
                {&CodeGenerator::kshiftld, 32, true},  {&CodeGenerator::kshiftlq, 64, true},
                {&CodeGenerator::kshiftrb, 8, false},  {&CodeGenerator::kshiftrw, 16, false},
                {&CodeGenerator::kshiftrd, 32, false}, {&CodeGenerator::kshiftrq, 64, false}};
  for (const auto& c : shifts) {
    for (std::uint8_t count : {0, 1, 3, 7, 8, 15, 16, 31, 33, 63, 64, 255}) {
      Jit jit;
      load_opmasks(jit);
      (jit.*c.emit)(reg::k3, reg::k1, count);
      jit.kmovq(jit.ptr[reg::rsi], reg::k3);
      Random random(count);
      uint64_t in[3] = {random.next(), random.next(), random.next()}, out = 0;
      jit.run(in, &out);
      const uint64_t m = width_mask(c.width), value = in[0] & m;
      const uint64_t expected =
          count >= c.width ? 0 : ((c.left ? value << count : value >> count) & m);
      EXPECT_EQ(out, expected) << (c.left ? "kshiftl" : "kshiftr") << " width " << c.width << " by "
                               << int{count};
    }
  }
  const struct {
    KOp3 emit;
    unsigned width;
  } unpacks[] = {{&CodeGenerator::kunpckbw, 16},
                 {&CodeGenerator::kunpckwd, 32},
                 {&CodeGenerator::kunpckdq, 64}};
  for (const auto& c : unpacks) {
    Jit jit;
    load_opmasks(jit);
    (jit.*c.emit)(reg::k3, reg::k1, reg::k2);
    jit.kmovq(jit.ptr[reg::rsi], reg::k3);
    Random random(c.width + 1);
    uint64_t in[3] = {random.next(), random.next(), random.next()}, out = 0;
    jit.run(in, &out);
    const unsigned half = c.width / 2;
    EXPECT_EQ(out, ((in[0] & width_mask(half)) << half) | (in[1] & width_mask(half)))
        << "kunpck width " << c.width;
  }
}

// kortest: ZF = (a|b) == 0, CF = (a|b) all ones; ktest: ZF = (a&b) == 0, CF = (~a&b) == 0.
// OF, SF, AF, PF are cleared.
TEST_F(OpmaskTest, TestsSetFlags) {
  using KTest = void (CodeGenerator::*)(const Opmask&, const Opmask&);
  const struct {
    const char* name;
    KTest emit;
    unsigned width;
    bool is_or;
  } cases[] = {{"kortestb", &CodeGenerator::kortestb, 8, true},
               {"kortestw", &CodeGenerator::kortestw, 16, true},
               {"kortestd", &CodeGenerator::kortestd, 32, true},
               {"kortestq", &CodeGenerator::kortestq, 64, true},
               {"ktestb", &CodeGenerator::ktestb, 8, false},
               {"ktestw", &CodeGenerator::ktestw, 16, false},
               {"ktestd", &CodeGenerator::ktestd, 32, false},
               {"ktestq", &CodeGenerator::ktestq, 64, false}};
  for (const auto& c : cases) {
    using namespace reg;
    Jit jit;
    load_opmasks(jit);
    jit.mov(al, 0x7F);
    jit.add(al, 1);  // sets OF, SF, AF: the test must clear them
    (jit.*c.emit)(k1, k2);
    jit.pushfq();
    jit.pop(rax);
    jit.mov(jit.qword[rsi], rax);
    const uint64_t m = width_mask(c.width);
    const uint64_t patterns[][2] = {{0, 0},     {m, 0}, {0, m},      {0x5, 0xA},
                                    {0x5, 0x4}, {m, m}, {0xF0, 0x0F}};
    for (const auto& p : patterns) {
      Random random(p[0] ^ p[1]);
      const uint64_t above = ~m & random.next();  // bits above the width do not count
      uint64_t in[3] = {p[0] | above, p[1] | ((above >> 1) & ~m), 0}, flags = 0;
      jit.run(in, &flags);
      const bool zf = c.is_or ? (p[0] | p[1]) == 0 : (p[0] & p[1]) == 0;
      const bool cf = c.is_or ? (p[0] | p[1]) == m : (~p[0] & p[1] & m) == 0;
      EXPECT_EQ((flags >> 6) & 1, zf ? 1u : 0u) << c.name << " ZF for " << p[0] << ", " << p[1];
      EXPECT_EQ(flags & 1, cf ? 1u : 0u) << c.name << " CF for " << p[0] << ", " << p[1];
      EXPECT_EQ(flags & ((1u << 2) | (1u << 4) | (1u << 7) | (1u << 11)), 0u)
          << c.name << " PF/AF/SF/OF";
    }
  }
}

// A mask computed by k instructions drives a masked EVEX add and a kortest loop exit.
TEST_F(OpmaskTest, ComputedMaskDrivesMaskedInstruction) {
  using namespace reg;
  Jit jit;
  jit.mov(eax, 0x00FF);
  jit.kmovw(k1, eax);
  jit.mov(eax, 0x0F0F);
  jit.kmovw(k2, eax);
  jit.kandw(k3, k1, k2);  // 0x000F
  jit.vmovdqu32(zmm20, jit.ptr[rdi]);
  jit.vpaddd(zmm20 | k3, zmm20, zmm20);
  jit.vmovdqu32(jit.ptr[rsi], zmm20);
  Vec512 in, out;
  for (unsigned i = 0; i < 16; ++i) in.set<std::uint32_t>(i, i + 1);
  jit.run(&in, &out);
  for (unsigned i = 0; i < 16; ++i)
    EXPECT_EQ(out.get<std::uint32_t>(i), i < 4 ? 2 * (i + 1) : i + 1) << i;
}

}  // namespace
}  // namespace qforge::emulate::test
