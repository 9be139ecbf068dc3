// Architectural register state of the interrupted thread, as the SIGILL handler sees it.
//
//   signal frame: uc_mcontext.fpregs -> standard-format (non-compacted) XSAVE image
//     +0    FXSAVE area     +24 MXCSR, +160 xmm0..15 bits 127:0 (16 B each),
//                           +464 sw_reserved: magic1, extended_size, xfeatures, xstate_size
//     +512  XSAVE header    xstate_bv: components present in the image (absent = all zero)
//     +avx  AVX component   ymm0..15 bits 255:128 (16 B each); avx = CPUID(0xD, 2).EBX
//     +zmm  ZMM_Hi256       zmm0..15 bits 511:256 (32 B each); only on CPUs with AVX-512
//   uc_mcontext.gregs       rax..r15, rip, rflags
//
//   thread-local shadow: the state this CPU does not have (zero in a new thread)
//     zmm_high[0..15]       zmm0..15 bits 511:256
//     zmm_top[0..15]        zmm16..31 bits 511:0
//     opmask[0..7]          k0..k7
//
// A write to a vector register writes its low `bytes` and zeroes everything above, up to
// bit 511, as a VEX or EVEX write to an xmm/ymm destination does on hardware. Writes set
// the SSE and AVX bits of xstate_bv so that sigreturn's XRSTOR takes the new values.
//
// Limit: native VEX instructions that run between emulated ones write ymm registers
// without clearing the shadow bits 511:256 (hardware would zero them). qforge's zmm
// kernels encode every vector instruction with EVEX, so this never arises there.
#pragma once

#include <Zydis/Zydis.h>
#include <ucontext.h>

#include <cstdint>

#include "jit/emulate/host_cpu.h"
#include "jit/emulate/vector.h"

namespace qforge::emulate {

// Records the XSAVE layout of this CPU; install() calls it before the handler can run.
void configure_register_file(const HostCpu& host);

class RegisterFile {
 public:
  explicit RegisterFile(ucontext_t* context);

  // False when the frame lacks the XSAVE image with AVX state this emulator relies on.
  bool valid() const { return valid_; }

  // zmm0..31, all 512 bits.
  Vec vector(unsigned index) const;
  // Writes the low `bytes` of `value` into zmm`index` and zeroes the bits above.
  void set_vector(unsigned index, const Vec& value, unsigned bytes);

  std::uint64_t opmask(unsigned index) const;
  void set_opmask(unsigned index, std::uint64_t value);

  // A general-purpose register of any width (al .. r15), zero-extended.
  std::uint64_t gpr(ZydisRegister reg) const;
  // Writes as hardware does: 32-bit writes zero bits 63:32, 8/16-bit writes merge.
  void set_gpr(ZydisRegister reg, std::uint64_t value);

  std::uint64_t rip() const;
  void set_rip(std::uint64_t value);
  std::uint64_t rflags() const;
  void set_rflags(std::uint64_t value);
  std::uint32_t mxcsr() const;
  void set_mxcsr(std::uint32_t value);

 private:
  std::uint64_t xstate_bv() const;
  void make_vector_state_explicit();

  ucontext_t* context_;
  std::uint8_t* xsave_;  // the frame's XSAVE image
  bool valid_ = false;
};

}  // namespace qforge::emulate
