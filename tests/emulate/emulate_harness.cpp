#include "tests/emulate/emulate_harness.h"

#include <setjmp.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "jit/emulate/emulator.h"

namespace qforge::emulate::test {

std::string hex(const Vec512& v, unsigned count, unsigned element_bytes) {
  std::string text;
  char digits[3];
  for (unsigned i = 0; i < count; i += element_bytes) {
    if (i) text += ' ';
    for (unsigned b = element_bytes; b-- > 0;) {
      std::snprintf(digits, sizeof digits, "%02x", v.bytes[i + b]);
      text += digits;
    }
  }
  return text;
}

Vec512 Random::bytes() {
  Vec512 v;
  for (unsigned i = 0; i < 8; ++i) v.set<std::uint64_t>(i, next());
  return v;
}

float Random::uniform(float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(engine_);
}

Vec512 Random::floats(float range) {
  Vec512 v;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned kind = next() % 16;
    float x;
    if (kind == 0) {
      x = 0.0f;
    } else if (kind == 1) {
      x = static_cast<float>(static_cast<int>(next() % 41) - 20) * 0.5f;
    } else {
      x = std::ldexp(uniform(-1.0f, 1.0f), static_cast<int>(next() % 16) - 8) * range / 256.0f;
    }
    v.set<float>(i, x);
  }
  return v;
}

void Jit::finalize() {
  if (finalized_) return;
  ret();
  readyRE();
  // Xbyak 6.68's readyRE() only acts for AutoGrow buffers: map R+X explicitly.
  setProtectModeRE();
  finalized_ = true;
}

void Jit::run(void* a, void* b, void* c, void* d) {
  finalize();
  getCode<void (*)(void*, void*, void*, void*)>()(a, b, c, d);
}

namespace {

thread_local sigjmp_buf* tls_sigill_escape = nullptr;

void escape_on_sigill(int, siginfo_t*, void*) {
  if (tls_sigill_escape) siglongjmp(*tls_sigill_escape, 1);
  std::abort();
}

}  // namespace

bool passes_sigill_on(unsigned features, const std::function<void()>& body) {
  const unsigned fixture_features = installed_features();
  uninstall();
  struct sigaction ours, saved;
  std::memset(&ours, 0, sizeof ours);
  ours.sa_sigaction = escape_on_sigill;
  ours.sa_flags = SA_SIGINFO;
  sigemptyset(&ours.sa_mask);
  sigaction(SIGILL, &ours, &saved);
  std::string why;
  if (features) {
    EXPECT_TRUE(install(features, &why)) << why;
  }
  sigjmp_buf escape;
  tls_sigill_escape = &escape;
  bool faulted = false;
  if (sigsetjmp(escape, 1) == 0) {
    body();
  } else {
    faulted = true;
  }
  tls_sigill_escape = nullptr;
  uninstall();
  sigaction(SIGILL, &saved, nullptr);
  if (fixture_features) {
    EXPECT_TRUE(install(fixture_features, &why)) << why;
  }
  return faulted;
}

void EmulatorTest::SetUp() {
  emulated_ = kAllFeatures & ~native_features();
  if (emulated_ == 0) return;
  std::string why;
  ASSERT_TRUE(install(emulated_, &why)) << why;
}

void EmulatorTest::TearDown() {
  uninstall();
}

const char* name(Masking m) {
  switch (m) {
    case Masking::kNone:
      return "unmasked";
    case Masking::kMerge:
      return "{k1}";
    default:
      return "{k1}{z}";
  }
}

const char* name(Source s) {
  switch (s) {
    case Source::kRegister:
      return "register";
    case Source::kMemory:
      return "memory";
    default:
      return "broadcast";
  }
}

Xbyak::Xmm vector_register(unsigned index, unsigned bytes) {
  const int i = static_cast<int>(index);
  if (bytes == 64) return Xbyak::Zmm(i);
  if (bytes == 32) return Xbyak::Ymm(i);
  return Xbyak::Xmm(i);
}

Operands::Operands(Xbyak::CodeGenerator& g, unsigned dst_index, Masking masking, Source source)
    : dst_index_(dst_index),
      masking_(masking),
      source_(source),
      memory_(g.ptr[g.rdi + 128]),
      broadcast_(g.ptr_b[g.rdi + 128]),
      sized_memory_{g.xword[g.rdi + 128], g.yword[g.rdi + 128], g.zword[g.rdi + 128]},
      sized_broadcast_{g.xword_b[g.rdi + 128], g.yword_b[g.rdi + 128], g.zword_b[g.rdi + 128]},
      src2_xmm_(vector_register(dst_index + 2, 16)),
      src2_ymm_(vector_register(dst_index + 2, 32)),
      src2_zmm_(vector_register(dst_index + 2, 64)) {}

Xbyak::Xmm Operands::dst(unsigned bytes) const {
  return decorate(vector_register(dst_index_, bytes));
}

Xbyak::Ymm Operands::dst_wide(unsigned bytes) const {
  const int i = static_cast<int>(dst_index_);
  return decorate(bytes == 64 ? Xbyak::Ymm(Xbyak::Zmm(i)) : Xbyak::Ymm(i));
}

Xbyak::Ymm Operands::src1_wide(unsigned bytes) const {
  const int i = static_cast<int>(dst_index_ + 1);
  return bytes == 64 ? Xbyak::Ymm(Xbyak::Zmm(i)) : Xbyak::Ymm(i);
}

Xbyak::Xmm Operands::src1(unsigned bytes) const {
  return vector_register(dst_index_ + 1, bytes);
}

Xbyak::Xmm Operands::src2_register(unsigned bytes) const {
  return vector_register(dst_index_ + 2, bytes);
}

const Xbyak::Operand& Operands::src2(unsigned bytes) const {
  if (source_ == Source::kMemory) return memory_;
  if (source_ == Source::kBroadcast) return broadcast_;
  return bytes == 64 ? src2_zmm_ : (bytes == 32 ? src2_ymm_ : src2_xmm_);
}

const Xbyak::Operand& Operands::src2_sized(unsigned bytes) const {
  const unsigned size_index = bytes == 64 ? 2 : (bytes == 32 ? 1 : 0);
  if (source_ == Source::kMemory) return sized_memory_[size_index];
  if (source_ == Source::kBroadcast) return sized_broadcast_[size_index];
  return src2(bytes);
}

Vec512 apply_masking(const Vec512& result, const Vec512& old_dst, std::uint64_t mask,
                     Masking masking, unsigned element_bytes, unsigned result_bytes) {
  Vec512 r;
  for (unsigned i = 0; i < result_bytes / element_bytes; ++i) {
    const bool selected = masking == Masking::kNone || ((mask >> i) & 1);
    const Vec512* from = selected ? &result : (masking == Masking::kMerge ? &old_dst : nullptr);
    if (from)
      std::memcpy(r.bytes + i * element_bytes, from->bytes + i * element_bytes, element_bytes);
  }
  return r;
}

namespace {

struct alignas(64) InputBlock {
  Vec512 dst, src1, src2;
  std::uint64_t mask = 0;
  std::uint8_t padding[56] = {};
};

InputBlock make_block(const VectorOp& op, Random& random) {
  InputBlock block;
  if (op.inputs) {
    const Inputs in = op.inputs(random);
    block.dst = in.dst;
    block.src1 = in.src1;
    block.src2 = in.src2;
  } else {
    block.dst = random.bytes();
    block.src1 = random.bytes();
    block.src2 = random.bytes();
  }
  block.mask = random.next();
  return block;
}

void emit_loads(Jit& jit, unsigned first) {
  using namespace Xbyak::util;
  for (unsigned i = 0; i < 3; ++i)
    jit.vmovdqu32(Xbyak::Zmm(static_cast<int>(first + i)), jit.ptr[rdi + 64 * i]);
  jit.kmovq(k1, jit.ptr[rdi + 192]);
}

}  // namespace

void check_vector_op(const VectorOp& op, int seeds) {
  using namespace Xbyak::util;
  const unsigned kFirstRegisters[] = {1, 16, 27};
  unsigned form = 0;
  for (unsigned vl : op.lengths) {
    for (Masking masking : {Masking::kNone, Masking::kMerge, Masking::kZero}) {
      for (Source source : {Source::kRegister, Source::kMemory, Source::kBroadcast}) {
        if (source == Source::kMemory && !op.memory_form) continue;
        if (source == Source::kBroadcast && op.broadcast_bytes == 0) continue;
        unsigned first = kFirstRegisters[form++ % 3];
        // Unmasked xmm/ymm forms of low registers may be VEX (native): keep them EVEX.
        if (vl < 64 && masking == Masking::kNone && first < 16) first = 16;
        Jit jit;
        emit_loads(jit, first);
        op.emit(jit, Operands(jit, first, masking, source), vl);
        jit.vmovdqu32(jit.ptr[rsi], Xbyak::Zmm(static_cast<int>(first)));
        for (int seed = 1; seed <= seeds; ++seed) {
          Random random(static_cast<std::uint64_t>(seed) * 7919 + vl);
          const InputBlock block = make_block(op, random);
          Vec512 actual;
          jit.run(const_cast<InputBlock*>(&block), &actual);
          Inputs in{block.dst, block.src1, block.src2, block.mask, masking};
          if (source == Source::kBroadcast)
            for (unsigned b = op.broadcast_bytes; b < 64; ++b)
              in.src2.bytes[b] = in.src2.bytes[b % op.broadcast_bytes];
          const unsigned result_bytes = op.result_bytes(vl);
          const Masking write_masking = op.opmask_selects ? Masking::kNone : masking;
          const Vec512 expected = apply_masking(op.reference(in, vl), block.dst, block.mask,
                                                write_masking, op.element_bytes, result_bytes);
          if (!(actual == expected)) {
            ADD_FAILURE() << op.name << " vl=" << vl * 8 << " " << name(masking)
                          << " src2=" << name(source) << " registers " << first << ".." << first + 2
                          << " seed " << seed << "\n  mask     " << std::hex << block.mask
                          << std::dec << "\n  expected " << hex(expected, 64, op.element_bytes)
                          << "\n  actual   " << hex(actual, 64, op.element_bytes);
            return;
          }
        }
      }
    }
  }
}

void check_compare_op(const CompareOp& op, int seeds) {
  using namespace Xbyak::util;
  for (unsigned vl : {16u, 32u, 64u}) {
    for (bool masked : {false, true}) {
      for (Source source : {Source::kRegister, Source::kMemory, Source::kBroadcast}) {
        if (source == Source::kBroadcast && op.broadcast_bytes == 0) continue;
        Jit jit;
        emit_loads(jit, 16);
        jit.kmovq(k2, jit.ptr[rdi + 200]);  // stale bits that the compare must overwrite
        const Operands operands(jit, 16, Masking::kNone, source);
        op.emit(jit, masked ? k2 | k1 : k2, operands.src1(vl), operands.src2(vl));
        jit.kmovq(jit.ptr[rsi], k2);
        for (int seed = 1; seed <= seeds; ++seed) {
          Random random(static_cast<std::uint64_t>(seed) * 31337 + vl);
          VectorOp shape;
          shape.inputs = op.inputs;
          InputBlock block = make_block(shape, random);
          std::memset(block.padding, 0xA5, sizeof block.padding);
          std::uint64_t actual = 0;
          jit.run(&block, &actual);
          Inputs in{block.dst, block.src1, block.src2, block.mask, Masking::kNone};
          if (source == Source::kBroadcast)
            for (unsigned b = op.broadcast_bytes; b < 64; ++b)
              in.src2.bytes[b] = in.src2.bytes[b % op.broadcast_bytes];
          std::uint64_t expected = 0;
          for (unsigned i = 0; i < vl / op.element_bytes; ++i)
            if ((!masked || ((block.mask >> i) & 1)) && op.holds(in, i))
              expected |= std::uint64_t{1} << i;
          if (actual != expected) {
            ADD_FAILURE() << op.name << " vl=" << vl * 8 << (masked ? " {k1}" : "")
                          << " src2=" << name(source) << " seed " << seed << std::hex
                          << "\n  expected " << expected << "\n  actual   " << actual;
            return;
          }
        }
      }
    }
  }
}

void check_against_native(const VectorOp& op, int seeds) {
  using namespace Xbyak::util;
  for (Source source : {Source::kRegister, Source::kMemory}) {
    if (source == Source::kMemory && !(op.memory_form && op.native_memory_form)) continue;
    Jit emulated, native;
    emit_loads(emulated, 16);
    op.emit(emulated, Operands(emulated, 16, Masking::kNone, source), 32);
    emulated.vmovdqu32(emulated.ptr[rsi], zmm16);
    for (int i = 0; i < 3; ++i) native.vmovdqu(Xbyak::Ymm(i), native.ptr[rdi + 64 * i]);
    op.emit(native, Operands(native, 0, Masking::kNone, source), 32);
    native.vmovdqu(native.ptr[rsi], ymm0);
    native.vzeroupper();
    for (int seed = 1; seed <= seeds; ++seed) {
      Random random(static_cast<std::uint64_t>(seed) * 104729);
      const InputBlock block = make_block(op, random);
      Vec512 from_emulator, from_hardware;
      const std::uint64_t before = emulated_instruction_count();
      native.run(const_cast<InputBlock*>(&block), &from_hardware);
      ASSERT_EQ(emulated_instruction_count(), before)
          << op.name << ": the VEX form was emulated, not run natively";
      emulated.run(const_cast<InputBlock*>(&block), &from_emulator);
      if (std::memcmp(from_emulator.bytes, from_hardware.bytes, 32) != 0) {
        ADD_FAILURE() << op.name
                      << " EVEX.256 (emulated) != VEX.256 (native), src2=" << name(source)
                      << " seed " << seed << "\n  native   "
                      << hex(from_hardware, 32, op.element_bytes) << "\n  emulated "
                      << hex(from_emulator, 32, op.element_bytes);
        return;
      }
    }
  }
}

}  // namespace qforge::emulate::test
