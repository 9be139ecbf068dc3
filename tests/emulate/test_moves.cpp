// Data movement: full-vector moves (load, store, register), masked stores that leave the
// other elements of memory alone, fault suppression of masked loads, the #GP of aligned
// moves, vmovd/vmovq, broadcasts from register/memory/GPR, extract and insert.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "jit/emulate/emulator.h"
#include "tests/emulate/emulate_harness.h"

namespace qforge::emulate::test {
namespace {

using Xbyak::CodeGenerator;
using Xbyak::Operand;
using Xbyak::Xmm;
namespace reg = Xbyak::util;

class MoveTest : public EmulatorTest {};

using Move = void (*)(CodeGenerator&, const Xmm&, const Operand&);
using Store = void (*)(CodeGenerator&, const Xbyak::Address&, const Xmm&);

struct MoveCase {
  const char* name;
  unsigned element_bytes;
  Move load;
  Store store;
};

const MoveCase kMoves[] = {
    {"vmovups", 4, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovups(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovups(a, x); }},
    {"vmovupd", 8, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovupd(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovupd(a, x); }},
    {"vmovapd", 8, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovapd(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovapd(a, x); }},
    {"vmovaps", 4, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovaps(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovaps(a, x); }},
    {"vmovdqu8", 1, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqu8(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqu8(a, x); }},
    {"vmovdqu16", 2, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqu16(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqu16(a, x); }},
    {"vmovdqu32", 4, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqu32(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqu32(a, x); }},
    {"vmovdqu64", 8, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqu64(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqu64(a, x); }},
    {"vmovdqa32", 4, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqa32(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqa32(a, x); }},
    {"vmovdqa64", 8, [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vmovdqa64(x, op); },
     [](CodeGenerator& g, const Xbyak::Address& a, const Xmm& x) { g.vmovdqa64(a, x); }},
};

TEST_F(MoveTest, LoadsAndRegisterCopiesUnderMask) {
  for (const MoveCase& c : kMoves) {
    VectorOp op;
    op.name = c.name;
    op.element_bytes = c.element_bytes;
    op.emit = [&c](CodeGenerator& g, const Operands& o, unsigned vl) {
      c.load(g, o.dst(vl), o.src2(vl));
    };
    op.reference = [](const Inputs& in, unsigned) { return in.src2; };
    check_vector_op(op);
  }
}

TEST_F(MoveTest, MaskedStoresWriteOnlySelectedElements) {
  for (const MoveCase& c : kMoves) {
    for (unsigned vl : {16u, 32u, 64u}) {
      for (bool masked : {false, true}) {
        Jit jit;
        jit.vmovdqu32(reg::zmm20, jit.ptr[reg::rdi]);
        jit.kmovq(reg::k1, jit.ptr[reg::rdi + 64]);
        const Xbyak::Address target = jit.ptr[reg::rsi + 64];
        c.store(jit, masked ? target | reg::k1 : target, vector_register(20, vl));
        for (int seed = 1; seed <= 3; ++seed) {
          Random random(seed);
          alignas(64) Vec512 input[2] = {random.bytes(), random.bytes()};
          alignas(64) Vec512 memory[3] = {random.bytes(), random.bytes(), random.bytes()};
          Vec512 expected[3] = {memory[0], memory[1], memory[2]};
          const std::uint64_t mask = input[1].get<std::uint64_t>(0);
          for (unsigned e = 0; e < vl / c.element_bytes; ++e)
            if (!masked || ((mask >> e) & 1))
              std::memcpy(expected[1].bytes + e * c.element_bytes,
                          input[0].bytes + e * c.element_bytes, c.element_bytes);
          jit.run(input, memory);
          for (int block = 0; block < 3; ++block)
            EXPECT_EQ(hex(memory[block]), hex(expected[block]))
                << c.name << " store vl=" << vl * 8 << (masked ? " {k1}" : "") << " block "
                << block;
        }
      }
    }
  }
}

// A page followed by an inaccessible one; masked accesses that stay in the first page
// must not fault, whatever the unselected elements would have touched.
class GuardedPage {
 public:
  GuardedPage() {
    const long page = sysconf(_SC_PAGESIZE);
    size_ = static_cast<std::size_t>(page);
    void* p = mmap(nullptr, 2 * size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<std::uint8_t*>(p);
    EXPECT_EQ(mprotect(base_ + size_, size_, PROT_NONE), 0);
  }
  ~GuardedPage() { munmap(base_, 2 * size_); }
  std::uint8_t* end() const { return base_ + size_; }

 private:
  std::uint8_t* base_ = nullptr;
  std::size_t size_ = 0;
};

TEST_F(MoveTest, MaskedAccessesSuppressFaultsOfUnselectedElements) {
  GuardedPage page;
  std::uint8_t* tail = page.end() - 32;  // 8 dwords before the guard page
  for (unsigned i = 0; i < 32; ++i) tail[i] = static_cast<std::uint8_t>(i + 1);
  Jit jit;
  jit.kmovq(reg::k1, jit.ptr[reg::rsi]);
  jit.vmovdqu32(reg::zmm5 | reg::k1 | reg::T_z, jit.ptr[reg::rdi]);
  jit.vmovdqu32(jit.ptr[reg::rdx], reg::zmm5);
  jit.vpternlogd(reg::zmm6, reg::zmm6, reg::zmm6, 0xFF);                     // all ones
  jit.vpaddd(reg::zmm6 | reg::k1 | reg::T_z, reg::zmm6, jit.ptr[reg::rdi]);  // loads too
  jit.vmovdqu32(jit.ptr[reg::rdx + 64], reg::zmm6);
  jit.vmovdqu32(jit.ptr[reg::rdi] | reg::k1, reg::zmm5);  // masked store
  const std::uint64_t mask = 0xFF;
  alignas(64) Vec512 out[2];
  jit.run(tail, const_cast<std::uint64_t*>(&mask), out);
  Vec512 loaded;
  std::memcpy(loaded.bytes, tail, 32);
  EXPECT_EQ(hex(out[0]), hex(loaded));
  Vec512 sums;
  for (unsigned i = 0; i < 8; ++i) sums.set<std::uint32_t>(i, loaded.get<std::uint32_t>(i) - 1);
  EXPECT_EQ(hex(out[1]), hex(sums));
}

TEST_F(MoveTest, AlignedMoveOfMisalignedAddressFaults) {
  if (!(emulated() & kAvx512)) GTEST_SKIP() << "AVX-512 is native: the fault is a SIGSEGV (#GP)";
  alignas(64) std::uint8_t buffer[256] = {};
  Jit load;
  load.vmovdqa32(reg::zmm1, load.ptr[reg::rdi]);
  EXPECT_FALSE(passes_sigill_on(kAvx512, [&] { load.run(buffer + 64); }));
  EXPECT_TRUE(passes_sigill_on(kAvx512, [&] { load.run(buffer + 68); }));
  Jit store;
  store.vmovaps(store.ptr[reg::rdi], reg::ymm17);
  EXPECT_FALSE(passes_sigill_on(kAvx512, [&] { store.run(buffer + 32); }));
  EXPECT_TRUE(passes_sigill_on(kAvx512, [&] { store.run(buffer + 16); }));
}

// vmovd/vmovq between xmm16+ and GPRs, memory and xmm: 4 or 8 bytes, the xmm destination
// zeroed above them (through bit 511), a GPR destination zero-extended.
TEST_F(MoveTest, MovdMovq) {
  using namespace reg;
  Jit jit;
  auto fill = [&](const Xbyak::Zmm& z) { jit.vmovdqu32(z, jit.ptr[rdi]); };
  fill(zmm20), jit.mov(eax, jit.dword[rdi + 64]), jit.vmovd(xmm20, eax);
  fill(zmm21), jit.vmovd(xmm21, jit.dword[rdi + 68]);
  fill(zmm22), jit.mov(rax, jit.qword[rdi + 72]), jit.vmovq(xmm22, rax);
  fill(zmm23), jit.vmovq(xmm23, jit.qword[rdi + 80]);
  fill(zmm24), jit.vmovdqu32(zmm25, jit.ptr[rdi + 64]), jit.vmovq(xmm24, xmm25);
  for (int i = 0; i < 5; ++i) jit.vmovdqu32(jit.ptr[rsi + 64 * i], Xbyak::Zmm(20 + i));
  fill(zmm26);
  jit.mov(rcx, -1), jit.vmovd(ecx, xmm26), jit.mov(jit.qword[rsi + 320], rcx);
  jit.vmovq(r8, xmm26), jit.mov(jit.qword[rsi + 328], r8);
  jit.vmovd(jit.dword[rsi + 336], xmm26);
  jit.vmovq(jit.qword[rsi + 344], xmm26);

  Random random(5);
  alignas(64) Vec512 input[2] = {random.bytes(), random.bytes()};
  alignas(64) Vec512 out[6];
  jit.run(input, out);
  auto low = [](const Vec512& from, unsigned offset, unsigned bytes) {
    Vec512 v;
    std::memcpy(v.bytes, from.bytes + offset, bytes);
    return v;
  };
  EXPECT_EQ(hex(out[0]), hex(low(input[1], 0, 4))) << "vmovd xmm, r32";
  EXPECT_EQ(hex(out[1]), hex(low(input[1], 4, 4))) << "vmovd xmm, m32";
  EXPECT_EQ(hex(out[2]), hex(low(input[1], 8, 8))) << "vmovq xmm, r64";
  EXPECT_EQ(hex(out[3]), hex(low(input[1], 16, 8))) << "vmovq xmm, m64";
  EXPECT_EQ(hex(out[4]), hex(low(input[1], 0, 8))) << "vmovq xmm, xmm";
  EXPECT_EQ(out[5].get<std::uint64_t>(0), input[0].get<std::uint32_t>(0)) << "vmovd r32, xmm";
  EXPECT_EQ(out[5].get<std::uint64_t>(1), input[0].get<std::uint64_t>(0)) << "vmovq r64, xmm";
  EXPECT_EQ(out[5].get<std::uint32_t>(4), input[0].get<std::uint32_t>(0)) << "vmovd m32, xmm";
  EXPECT_EQ(out[5].get<std::uint64_t>(3), input[0].get<std::uint64_t>(0)) << "vmovq m64, xmm";
}

// Element 0 of src2 (register or memory) in every element.
template <typename T>
Vec512 splat(const Vec512& source, unsigned vl, unsigned chunk = sizeof(T)) {
  Vec512 r;
  for (unsigned offset = 0; offset < vl; offset += chunk)
    std::memcpy(r.bytes + offset, source.bytes, chunk);
  return r;
}

template <typename T>
VectorOp broadcast_op(const char* name, Move emit) {
  VectorOp op;
  op.name = name;
  op.element_bytes = sizeof(T);
  op.emit = [emit](CodeGenerator& g, const Operands& o, unsigned vl) {
    emit(g, o.dst(vl), o.src2(16));
  };
  op.reference = [](const Inputs& in, unsigned vl) { return splat<T>(in.src2, vl); };
  return op;
}

TEST_F(MoveTest, BroadcastsFromRegisterAndMemory) {
  check_vector_op(broadcast_op<std::uint8_t>(
      "vpbroadcastb",
      [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vpbroadcastb(x, op); }));
  check_vector_op(broadcast_op<std::uint16_t>(
      "vpbroadcastw",
      [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vpbroadcastw(x, op); }));
  check_vector_op(broadcast_op<std::uint32_t>(
      "vpbroadcastd",
      [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vpbroadcastd(x, op); }));
  check_vector_op(broadcast_op<std::uint64_t>(
      "vpbroadcastq",
      [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vpbroadcastq(x, op); }));
  check_vector_op(broadcast_op<float>(
      "vbroadcastss",
      [](CodeGenerator& g, const Xmm& x, const Operand& op) { g.vbroadcastss(x, op); }));
  VectorOp sd = broadcast_op<double>("vbroadcastsd", nullptr);
  sd.lengths = {32, 64};
  sd.emit = [](CodeGenerator& g, const Operands& o, unsigned vl) {
    g.vbroadcastsd(o.dst_wide(vl), o.src2(16));
  };
  check_vector_op(sd);
}

TEST_F(MoveTest, BroadcastsFromGeneralPurposeRegisters) {
  using namespace reg;
  struct Case {
    const char* name;
    unsigned bytes;
    void (*emit)(CodeGenerator&, const Xmm&);
  };
  const Case cases[] = {
      {"vpbroadcastb r32", 1,
       [](CodeGenerator& g, const Xmm& x) {
         g.mov(eax, g.dword[rdi + 128]), g.vpbroadcastb(x, al);
       }},
      {"vpbroadcastw r32", 2,
       [](CodeGenerator& g, const Xmm& x) {
         g.mov(eax, g.dword[rdi + 128]), g.vpbroadcastw(x, ax);
       }},
      {"vpbroadcastd r32", 4,
       [](CodeGenerator& g, const Xmm& x) {
         g.mov(eax, g.dword[rdi + 128]), g.vpbroadcastd(x, eax);
       }},
      {"vpbroadcastq r64", 8,
       [](CodeGenerator& g, const Xmm& x) {
         g.mov(rax, g.qword[rdi + 128]), g.vpbroadcastq(x, rax);
       }},
  };
  for (const Case& c : cases) {
    VectorOp op;
    op.name = c.name;
    op.element_bytes = c.bytes;
    op.memory_form = false;
    op.emit = [&c](CodeGenerator& g, const Operands& o, unsigned vl) { c.emit(g, o.dst(vl)); };
    op.reference = [&c](const Inputs& in, unsigned vl) {
      Vec512 r;
      for (unsigned offset = 0; offset < vl; offset += c.bytes)
        std::memcpy(r.bytes + offset, in.src2.bytes, c.bytes);
      return r;
    };
    check_vector_op(op);
  }
}

TEST_F(MoveTest, BlockBroadcastsFromMemory) {
  struct Case {
    const char* name;
    unsigned block, element;
    std::vector<unsigned> lengths;
    void (*emit)(CodeGenerator&, const Operands&, unsigned);
  };
  const Case cases[] = {
      {"vbroadcasti32x4",
       16,
       4,
       {32, 64},
       [](CodeGenerator& g, const Operands& o, unsigned vl) {
         g.vbroadcasti32x4(o.dst_wide(vl), o.memory());
       }},
      {"vbroadcastf32x4",
       16,
       4,
       {32, 64},
       [](CodeGenerator& g, const Operands& o, unsigned vl) {
         g.vbroadcastf32x4(o.dst_wide(vl), o.memory());
       }},
      {"vbroadcasti32x8",
       32,
       4,
       {64},
       [](CodeGenerator& g, const Operands& o, unsigned) {
         g.vbroadcasti32x8(o.dst_zmm(), o.memory());
       }},
      {"vbroadcasti64x4",
       32,
       8,
       {64},
       [](CodeGenerator& g, const Operands& o, unsigned) {
         g.vbroadcasti64x4(o.dst_zmm(), o.memory());
       }},
      {"vbroadcastf32x8",
       32,
       4,
       {64},
       [](CodeGenerator& g, const Operands& o, unsigned) {
         g.vbroadcastf32x8(o.dst_zmm(), o.memory());
       }},
      {"vbroadcastf64x4",
       32,
       8,
       {64},
       [](CodeGenerator& g, const Operands& o, unsigned) {
         g.vbroadcastf64x4(o.dst_zmm(), o.memory());
       }},
  };
  for (const Case& c : cases) {
    VectorOp op;
    op.name = c.name;
    op.element_bytes = c.element;
    op.lengths = c.lengths;
    op.emit = c.emit;
    op.reference = [&c](const Inputs& in, unsigned vl) {
      return splat<std::uint8_t>(in.src2, vl, c.block);
    };
    check_vector_op(op);
  }
}

TEST_F(MoveTest, ExtractBlocksToRegisterAndMemory) {
  for (std::uint8_t imm = 0; imm < 4; ++imm) {
    struct Case {
      const char* name;
      unsigned block, element;
      std::vector<unsigned> lengths;
      void (*emit)(CodeGenerator&, const Operand&, const Operands&, unsigned, std::uint8_t);
    };
    const Case cases[] = {
        {"vextracti32x4",
         16,
         4,
         {32, 64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned vl, std::uint8_t i) {
           g.vextracti32x4(d, o.src1_wide(vl), i);
         }},
        {"vextractf32x4",
         16,
         4,
         {32, 64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned vl, std::uint8_t i) {
           g.vextractf32x4(d, o.src1_wide(vl), i);
         }},
        {"vextracti32x8",
         32,
         4,
         {64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned, std::uint8_t i) {
           g.vextracti32x8(d, o.src1_zmm(), i);
         }},
        {"vextractf32x8",
         32,
         4,
         {64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned, std::uint8_t i) {
           g.vextractf32x8(d, o.src1_zmm(), i);
         }},
        {"vextracti64x4",
         32,
         8,
         {64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned, std::uint8_t i) {
           g.vextracti64x4(d, o.src1_zmm(), i);
         }},
        {"vextractf64x4",
         32,
         8,
         {64},
         [](CodeGenerator& g, const Operand& d, const Operands& o, unsigned, std::uint8_t i) {
           g.vextractf64x4(d, o.src1_zmm(), i);
         }},
    };
    for (const Case& c : cases) {
      VectorOp op;
      op.name = std::string(c.name) + " imm " + std::to_string(imm);
      op.element_bytes = c.element;
      op.lengths = c.lengths;
      op.memory_form = false;
      op.result_bytes = [&c](unsigned) { return c.block; };
      op.emit = [&c, imm](CodeGenerator& g, const Operands& o, unsigned vl) {
        c.emit(g, o.dst(c.block), o, vl, imm);
      };
      op.reference = [&c, imm](const Inputs& in, unsigned vl) {
        Vec512 r;
        const unsigned block = imm & (vl / c.block - 1);
        std::memcpy(r.bytes, in.src1.bytes + block * c.block, c.block);
        return r;
      };
      check_vector_op(op);

      // The same into memory (Xbyak 6.68 has no masked memory form of vextract*).
      using namespace reg;
      Jit jit;
      jit.vmovdqu32(zmm17, jit.ptr[rdi]);
      c.emit(jit, jit.ptr[rsi], Operands(jit, 16, Masking::kNone, Source::kRegister),
             c.lengths.back(), imm);
      Random random(imm + 11);
      alignas(64) Vec512 input = random.bytes();
      alignas(64) Vec512 memory = random.bytes();
      Vec512 expected = memory;
      const unsigned vl = c.lengths.back();
      std::memcpy(expected.bytes, input.bytes + (imm & (vl / c.block - 1)) * c.block, c.block);
      jit.run(&input, &memory);
      EXPECT_EQ(hex(memory), hex(expected)) << c.name << " to memory, imm " << int{imm};
    }
  }
}

TEST_F(MoveTest, InsertBlocks) {
  for (std::uint8_t imm = 0; imm < 4; ++imm) {
    struct Case {
      const char* name;
      unsigned block, element;
      std::vector<unsigned> lengths;
      void (*emit)(CodeGenerator&, const Operands&, unsigned, std::uint8_t);
    };
    const Case cases[] = {
        {"vinserti32x4",
         16,
         4,
         {32, 64},
         [](CodeGenerator& g, const Operands& o, unsigned vl, std::uint8_t i) {
           g.vinserti32x4(o.dst_wide(vl), o.src1_wide(vl), o.src2(16), i);
         }},
        {"vinsertf32x4",
         16,
         4,
         {32, 64},
         [](CodeGenerator& g, const Operands& o, unsigned vl, std::uint8_t i) {
           g.vinsertf32x4(o.dst_wide(vl), o.src1_wide(vl), o.src2(16), i);
         }},
        {"vinserti32x8",
         32,
         4,
         {64},
         [](CodeGenerator& g, const Operands& o, unsigned, std::uint8_t i) {
           g.vinserti32x8(o.dst_zmm(), o.src1_zmm(), o.src2(32), i);
         }},
        {"vinsertf32x8",
         32,
         4,
         {64},
         [](CodeGenerator& g, const Operands& o, unsigned, std::uint8_t i) {
           g.vinsertf32x8(o.dst_zmm(), o.src1_zmm(), o.src2(32), i);
         }},
        {"vinserti64x4",
         32,
         8,
         {64},
         [](CodeGenerator& g, const Operands& o, unsigned, std::uint8_t i) {
           g.vinserti64x4(o.dst_zmm(), o.src1_zmm(), o.src2(32), i);
         }},
        {"vinsertf64x4",
         32,
         8,
         {64},
         [](CodeGenerator& g, const Operands& o, unsigned, std::uint8_t i) {
           g.vinsertf64x4(o.dst_zmm(), o.src1_zmm(), o.src2(32), i);
         }},
    };
    for (const Case& c : cases) {
      VectorOp op;
      op.name = std::string(c.name) + " imm " + std::to_string(imm);
      op.element_bytes = c.element;
      op.lengths = c.lengths;
      op.emit = [&c, imm](CodeGenerator& g, const Operands& o, unsigned vl) {
        c.emit(g, o, vl, imm);
      };
      op.reference = [&c, imm](const Inputs& in, unsigned vl) {
        Vec512 r = in.src1;
        std::memcpy(r.bytes + (imm & (vl / c.block - 1)) * c.block, in.src2.bytes, c.block);
        return r;
      };
      check_vector_op(op);
    }
  }
}

}  // namespace
}  // namespace qforge::emulate::test
