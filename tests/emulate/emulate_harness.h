// Test harness for the instruction emulator: JIT-compiled snippets (Xbyak), a fixture
// that installs the emulator for every feature this CPU lacks, and a generic checker
// that runs one vector instruction in every form against a scalar reference.
//
//   check_vector_op(op):  for vl in {xmm, ymm, zmm} x masking {none, {k1}, {k1}{z}}
//                         x src2 {register, memory, {1toN}} x seeds:
//       zmm[d] <- dst, zmm[d+1] <- src1, zmm[d+2] <- src2, k1 <- mask   (inputs block)
//       <instruction>
//       out <- zmm[d]   (all 512 bits: the bits above the result must be zero)
//   and expected = op.reference(dst, src1, src2') merged under the mask, zero above.
#pragma once

#include <gtest/gtest.h>
#include <xbyak/xbyak.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace qforge::emulate::test {

struct alignas(64) Vec512 {
  std::uint8_t bytes[64] = {};

  template <typename T>
  T get(unsigned i) const {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    return v;
  }
  template <typename T>
  void set(unsigned i, T v) {
    std::memcpy(bytes + i * sizeof(T), &v, sizeof(T));
  }
  bool operator==(const Vec512& other) const {
    return std::memcmp(bytes, other.bytes, sizeof bytes) == 0;
  }
};

// "0x.. .. .." of the first `count` bytes, element by element of `element_bytes`.
std::string hex(const Vec512& v, unsigned count = 64, unsigned element_bytes = 4);

class Random {
 public:
  explicit Random(std::uint64_t seed) : engine_(seed) {}
  std::uint64_t next() { return engine_(); }
  Vec512 bytes();
  // Floats in (-range, range) with varied exponents, and a few exact zeros / integers.
  Vec512 floats(float range = 100.0f);
  float uniform(float lo, float hi);

 private:
  std::mt19937_64 engine_;
};

// A snippet of code called as void(void* a, void* b, void* c, void* d) (rdi, rsi, rdx, rcx).
class Jit : public Xbyak::CodeGenerator {
 public:
  Jit() : Xbyak::CodeGenerator(16384, Xbyak::DontSetProtectRWE) {}
  // Appends `ret` and maps the code read + execute; done by the first run() unless called
  // before (as it must be when several threads run the same code).
  void finalize();
  void run(void* a = nullptr, void* b = nullptr, void* c = nullptr, void* d = nullptr);

 private:
  bool finalized_ = false;
};

// Installs the emulator for the features the CPU does not run natively (so the tests
// also pass, natively, on a CPU that has them) and uninstalls it afterwards.
class EmulatorTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Features being emulated (0 on a CPU with everything native).
  unsigned emulated() const { return emulated_; }

 private:
  unsigned emulated_ = 0;
};

enum class Masking { kNone, kMerge, kZero };
enum class Source { kRegister, kMemory, kBroadcast };
const char* name(Masking m);
const char* name(Source s);

// The operands of one emitted instruction: destination register `dst_index` with the
// masking applied, src1 = register dst_index + 1, src2 = register dst_index + 2 or the
// memory block at [rdi + 128] (plain or {1toN}). Sizes in bytes: 16, 32, 64.
class Operands {
 public:
  Operands(Xbyak::CodeGenerator& g, unsigned dst_index, Masking masking, Source source);
  Xbyak::Xmm dst(unsigned bytes) const;
  Xbyak::Xmm src1(unsigned bytes) const;
  const Xbyak::Operand& src2(unsigned bytes) const;
  // src2 with the memory forms sized (xword/yword/zword, _b for broadcast), for the
  // mnemonics whose vector length Xbyak cannot infer from a memory source.
  const Xbyak::Operand& src2_sized(unsigned bytes) const;
  Xbyak::Xmm src2_register(unsigned bytes) const;
  const Xbyak::Address& memory() const { return memory_; }
  Source source() const { return source_; }
  unsigned dst_index() const { return dst_index_; }
  // Typed forms for the Xbyak mnemonics that take Ymm/Zmm (a Ymm may hold a zmm).
  Xbyak::Ymm dst_wide(unsigned bytes) const;
  Xbyak::Ymm src1_wide(unsigned bytes) const;
  Xbyak::Zmm dst_zmm() const { return decorate(Xbyak::Zmm(static_cast<int>(dst_index_))); }
  Xbyak::Zmm src1_zmm() const { return Xbyak::Zmm(static_cast<int>(dst_index_ + 1)); }
  // Adds {k1} / {k1}{z} as the masking says.
  template <typename R>
  R decorate(R r) const {
    if (masking_ != Masking::kNone) r = r | Xbyak::util::k1;
    if (masking_ == Masking::kZero) r = r | Xbyak::util::T_z;
    return r;
  }

 private:
  unsigned dst_index_;
  Masking masking_;
  Source source_;
  Xbyak::Address memory_, broadcast_;
  Xbyak::Address sized_memory_[3], sized_broadcast_[3];  // 16, 32, 64 bytes
  Xbyak::Xmm src2_xmm_, src2_ymm_, src2_zmm_;
};

// Returns the xmm/ymm/zmm register `index` for a size of 16/32/64 bytes.
Xbyak::Xmm vector_register(unsigned index, unsigned bytes);

// Runs `body` with a SIGILL handler of the test's own installed underneath the emulator
// (which is reinstalled for `features`); returns whether a SIGILL reached that handler,
// i.e. whether the emulator passed the fault on. The fixture's emulator is restored.
bool passes_sigill_on(unsigned features, const std::function<void()>& body);

struct Inputs {
  Vec512 dst, src1, src2;
  std::uint64_t mask = 0;
  Masking masking = Masking::kNone;
};

struct VectorOp {
  std::string name;
  unsigned element_bytes = 4;    // destination element: the opmask granularity
  unsigned broadcast_bytes = 0;  // embedded-broadcast element, 0 = no {1toN} form
  std::vector<unsigned> lengths = {16, 32, 64};
  bool memory_form = true;         // src2 may be memory
  bool native_memory_form = true;  // ... also in the VEX encoding (check_against_native)
  std::function<void(Xbyak::CodeGenerator&, const Operands&, unsigned vl)> emit;
  // Unmasked result in the low result_bytes(vl) bytes, from the inputs (src2 with any
  // broadcast already applied).
  std::function<Vec512(const Inputs&, unsigned vl)> reference;
  std::function<unsigned(unsigned vl)> result_bytes = [](unsigned vl) { return vl; };
  std::function<Inputs(Random&)> inputs;  // default: random bytes
  // The opmask selects between sources (vpblendm*) instead of masking the write: the
  // reference applies it, from Inputs::mask and Inputs::masking.
  bool opmask_selects = false;
};

// An instruction that compares into an opmask: k2{k1} = predicate(src1, src2).
struct CompareOp {
  std::string name;
  unsigned element_bytes = 4;
  unsigned broadcast_bytes = 0;
  std::function<void(Xbyak::CodeGenerator&, const Xbyak::Opmask&, const Xbyak::Xmm& src1,
                     const Xbyak::Operand& src2)>
      emit;
  // Whether element i satisfies the predicate (src2 with any broadcast applied).
  std::function<bool(const Inputs&, unsigned i)> holds;
  std::function<Inputs(Random&)> inputs;
};

// Runs `op` for every length, with and without {k1}, src2 in register/memory/{1toN}; the
// whole k2 (bits at and above the element count must be zero) is compared.
void check_compare_op(const CompareOp& op, int seeds = 3);

// Runs `op` in every form and seed; each mismatch is a test failure naming the form.
void check_vector_op(const VectorOp& op, int seeds = 3);

// Runs `op` at vl = 32 without masking twice: EVEX-encoded on ymm16-18 (emulated) and
// VEX-encoded on ymm0-2 (native on this CPU), and requires bit-identical results.
void check_against_native(const VectorOp& op, int seeds = 3);

// Applies masking to an unmasked result as hardware does for a register destination.
Vec512 apply_masking(const Vec512& result, const Vec512& old_dst, std::uint64_t mask,
                     Masking masking, unsigned element_bytes, unsigned result_bytes);

// Element-wise references.
template <typename T, typename Fn>
Vec512 map1(const Vec512& a, unsigned vl, Fn fn) {
  Vec512 r;
  for (unsigned i = 0; i < vl / sizeof(T); ++i) r.set<T>(i, static_cast<T>(fn(a.get<T>(i))));
  return r;
}
template <typename T, typename Fn>
Vec512 map2(const Vec512& a, const Vec512& b, unsigned vl, Fn fn) {
  Vec512 r;
  for (unsigned i = 0; i < vl / sizeof(T); ++i)
    r.set<T>(i, static_cast<T>(fn(a.get<T>(i), b.get<T>(i))));
  return r;
}
template <typename T, typename Fn>
Vec512 map3(const Vec512& a, const Vec512& b, const Vec512& c, unsigned vl, Fn fn) {
  Vec512 r;
  for (unsigned i = 0; i < vl / sizeof(T); ++i)
    r.set<T>(i, static_cast<T>(fn(a.get<T>(i), b.get<T>(i), c.get<T>(i))));
  return r;
}

}  // namespace qforge::emulate::test
