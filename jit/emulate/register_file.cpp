#include "jit/emulate/register_file.h"

#include <cstddef>
#include <cstring>

namespace qforge::emulate {
namespace {

// FXSAVE / XSAVE image offsets (Intel SDM vol. 1, 10.5 and 13.4).
constexpr std::size_t kMxcsrOffset = 24;
constexpr std::size_t kXmmOffset = 160;
constexpr std::size_t kSwReservedOffset = 464;
constexpr std::size_t kXstateBvOffset = 512;
static_assert(offsetof(_libc_fpstate, mxcsr) == kMxcsrOffset);
static_assert(offsetof(_libc_fpstate, _xmm) == kXmmOffset);

// The kernel's marker that an XSAVE image follows the FXSAVE area (FP_XSTATE_MAGIC1 in
// Linux's uapi asm/sigcontext.h), and the layout of the sw_reserved bytes it fills in.
constexpr std::uint32_t kFpXstateMagic1 = 0x46505853;
struct SwReserved {
  std::uint32_t magic1;
  std::uint32_t extended_size;
  std::uint64_t xfeatures;
  std::uint32_t xstate_size;
};

constexpr std::uint64_t kSseBit = 1u << 1, kAvxBit = 1u << 2, kZmmHi256Bit = 1u << 6;
constexpr unsigned kAvxComponentBytes = 256;

struct FrameLayout {
  std::uint32_t avx_offset = 0;
  std::uint32_t zmm_hi256_offset = 0;  // nonzero: bits 511:256 are real registers
};
FrameLayout g_layout;

struct ShadowRegisters {
  std::uint8_t zmm_high[16][32];
  Vec zmm_top[16];
  std::uint64_t opmask[8];
};
// initial-exec: the handler must reach its thread's state without __tls_get_addr.
static thread_local ShadowRegisters tls_shadow __attribute__((tls_model("initial-exec")));

// gregs index of rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8 .. r15 (Zydis / encoding order).
constexpr int kGregIndex[16] = {REG_RAX, REG_RCX, REG_RDX, REG_RBX, REG_RSP, REG_RBP,
                                REG_RSI, REG_RDI, REG_R8,  REG_R9,  REG_R10, REG_R11,
                                REG_R12, REG_R13, REG_R14, REG_R15};

struct GprSlot {
  int greg = -1;
  unsigned shift = 0;  // 8 for ah, ch, dh, bh
  unsigned bits = 64;
};

GprSlot gpr_slot(ZydisRegister reg) {
  GprSlot slot;
  const ZydisRegister full = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (full < ZYDIS_REGISTER_RAX || full > ZYDIS_REGISTER_R15) return slot;
  slot.greg = kGregIndex[full - ZYDIS_REGISTER_RAX];
  slot.bits = ZydisRegisterGetWidth(ZYDIS_MACHINE_MODE_LONG_64, reg);
  if (reg >= ZYDIS_REGISTER_AH && reg <= ZYDIS_REGISTER_BH) slot.shift = 8;
  return slot;
}

}  // namespace

void configure_register_file(const HostCpu& host) {
  g_layout.avx_offset = host.avx_offset;
  g_layout.zmm_hi256_offset = host.avx512f ? host.zmm_hi256_offset : 0;
}

RegisterFile::RegisterFile(ucontext_t* context)
    : context_(context), xsave_(reinterpret_cast<std::uint8_t*>(context->uc_mcontext.fpregs)) {
  if (!xsave_ || g_layout.avx_offset == 0) return;
  SwReserved sw;
  std::memcpy(&sw, xsave_ + kSwReservedOffset, sizeof sw);
  valid_ = sw.magic1 == kFpXstateMagic1 &&
           (sw.xfeatures & (kSseBit | kAvxBit)) == (kSseBit | kAvxBit) &&
           sw.xstate_size >= g_layout.avx_offset + kAvxComponentBytes;
}

std::uint64_t RegisterFile::xstate_bv() const {
  std::uint64_t bv;
  std::memcpy(&bv, xsave_ + kXstateBvOffset, sizeof bv);
  return bv;
}

// A component whose xstate_bv bit is clear is in its initial (all-zero) state and its
// bytes in the image are stale: zero them before the first write and mark them present.
void RegisterFile::make_vector_state_explicit() {
  std::uint64_t bv = xstate_bv();
  if (!(bv & kSseBit)) std::memset(xsave_ + kXmmOffset, 0, 16 * 16);
  if (!(bv & kAvxBit)) std::memset(xsave_ + g_layout.avx_offset, 0, 16 * 16);
  bv |= kSseBit | kAvxBit;
  std::memcpy(xsave_ + kXstateBvOffset, &bv, sizeof bv);
}

Vec RegisterFile::vector(unsigned index) const {
  Vec v = zero_vector();
  if (index >= 16) return tls_shadow.zmm_top[index - 16];
  const std::uint64_t bv = xstate_bv();
  if (bv & kSseBit) std::memcpy(v.bytes, xsave_ + kXmmOffset + 16 * index, 16);
  if (bv & kAvxBit) std::memcpy(v.bytes + 16, xsave_ + g_layout.avx_offset + 16 * index, 16);
  if (g_layout.zmm_hi256_offset) {
    if (bv & kZmmHi256Bit)
      std::memcpy(v.bytes + 32, xsave_ + g_layout.zmm_hi256_offset + 32 * index, 32);
  } else {
    std::memcpy(v.bytes + 32, tls_shadow.zmm_high[index], 32);
  }
  return v;
}

void RegisterFile::set_vector(unsigned index, const Vec& value, unsigned bytes) {
  Vec v = zero_vector();
  std::memcpy(v.bytes, value.bytes, bytes < kVectorBytes ? bytes : kVectorBytes);
  if (index >= 16) {
    tls_shadow.zmm_top[index - 16] = v;
    return;
  }
  make_vector_state_explicit();
  std::memcpy(xsave_ + kXmmOffset + 16 * index, v.bytes, 16);
  std::memcpy(xsave_ + g_layout.avx_offset + 16 * index, v.bytes + 16, 16);
  if (g_layout.zmm_hi256_offset) {
    if (xstate_bv() & kZmmHi256Bit)
      std::memcpy(xsave_ + g_layout.zmm_hi256_offset + 32 * index, v.bytes + 32, 32);
  } else {
    std::memcpy(tls_shadow.zmm_high[index], v.bytes + 32, 32);
  }
}

std::uint64_t RegisterFile::opmask(unsigned index) const {
  return tls_shadow.opmask[index & 7];
}

void RegisterFile::set_opmask(unsigned index, std::uint64_t value) {
  tls_shadow.opmask[index & 7] = value;
}

std::uint64_t RegisterFile::gpr(ZydisRegister reg) const {
  const GprSlot slot = gpr_slot(reg);
  if (slot.greg < 0) return 0;
  const std::uint64_t full = static_cast<std::uint64_t>(context_->uc_mcontext.gregs[slot.greg]);
  const std::uint64_t value = full >> slot.shift;
  return slot.bits >= 64 ? value : value & ((std::uint64_t{1} << slot.bits) - 1);
}

void RegisterFile::set_gpr(ZydisRegister reg, std::uint64_t value) {
  const GprSlot slot = gpr_slot(reg);
  if (slot.greg < 0) return;
  greg_t& target = context_->uc_mcontext.gregs[slot.greg];
  std::uint64_t result;
  if (slot.bits == 64) {
    result = value;
  } else if (slot.bits == 32) {
    result = value & 0xFFFFFFFFu;
  } else {
    const std::uint64_t field = ((std::uint64_t{1} << slot.bits) - 1) << slot.shift;
    result = (static_cast<std::uint64_t>(target) & ~field) | ((value << slot.shift) & field);
  }
  target = static_cast<greg_t>(result);
}

std::uint64_t RegisterFile::rip() const {
  return static_cast<std::uint64_t>(context_->uc_mcontext.gregs[REG_RIP]);
}
void RegisterFile::set_rip(std::uint64_t value) {
  context_->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(value);
}
std::uint64_t RegisterFile::rflags() const {
  return static_cast<std::uint64_t>(context_->uc_mcontext.gregs[REG_EFL]);
}
void RegisterFile::set_rflags(std::uint64_t value) {
  context_->uc_mcontext.gregs[REG_EFL] = static_cast<greg_t>(value);
}

std::uint32_t RegisterFile::mxcsr() const {
  std::uint32_t value;
  std::memcpy(&value, xsave_ + kMxcsrOffset, sizeof value);
  return value;
}
void RegisterFile::set_mxcsr(std::uint32_t value) {
  std::memcpy(xsave_ + kMxcsrOffset, &value, sizeof value);
}

}  // namespace qforge::emulate
