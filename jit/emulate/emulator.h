// qforge::emulate — runs AVX512-VNNI (EVEX), AVX-VNNI (VEX) and AMX-INT8 code on a CPU
// that lacks them. Every such instruction raises #UD there; a SIGILL handler decodes the
// faulting instruction (Zydis), emulates it on the interrupted thread's registers and
// on thread-local state for what the CPU does not have (zmm bits 511:256, zmm16-31,
// k0-k7, AMX tiles), and resumes after it. Code in between runs natively.
//
// Test support and an explicit opt-in: nothing in qforge installs it implicitly.
//
//   install(kAvx512 | kAmx, &why)  ->  run generated kernels  ->  uninstall()
//
// A SIGILL the emulator does not handle (another instruction, a feature not installed,
// an instruction that faults on hardware too, such as an AMX shape error) goes to the
// handler that was installed before; if that was the default action, the process dies of
// SIGILL as it would without the emulator. Before passing on an instruction of an
// installed feature that it cannot emulate, the handler writes one line to stderr naming
// the mnemonic and its address.
//
// Limits (where the emulation is not the hardware):
//   - zmm bits 511:256, zmm16-31 and k0-7 live in thread-local memory. Native VEX code
//     between emulated instructions (vzeroupper included) does not clear those upper bits
//     as AVX-512 hardware would; qforge's zmm kernels encode every vector instruction with
//     EVEX, so this never arises there. A signal handler that itself runs emulated code
//     shares that state with the code it interrupted.
//   - vrcp14ps / vrsqrt14ps return the correctly rounded 1/x and 1/sqrt(x): within the
//     architectural 2^-14 bound, not the hardware's table values bit for bit.
//   - MXCSR: rounding, DAZ and FTZ are honoured and arithmetic sets the sticky flags;
//     conversions computed in the integer domain (fp16, bf16) set none; unmasked
//     floating-point exceptions are not delivered.
//   - Masked memory operands read only the selected elements where each element feeds
//     its own position; permute tables and shuffle sources are read whole.
//   - An invalid ldtilecfg operand (#GP on hardware) is passed on as the SIGILL.
//   - Not decoded: segment overrides (fs/gs), VSIB (gathers/scatters).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qforge::emulate {

enum Feature : unsigned {
  kAvx512 = 1,   // EVEX instructions (AVX512F/BW/DQ/VL/VNNI/BF16) and VEX opmask instructions
  kAvxVnni = 2,  // VEX vpdpbusd, vpdpbusds, vpdpwssd, vpdpwssds
  kAmx = 4,      // AMX-TILE, AMX-INT8, AMX-BF16
};
inline constexpr unsigned kAllFeatures = kAvx512 | kAvxVnni | kAmx;

// The features this CPU (and OS) runs natively; install() refuses them.
unsigned native_features();

// Installs the SIGILL handler for `features` (a Feature bitmask). Returns false with
// *reason set, installing nothing, when a requested feature runs natively or the OS does
// not provide the XSAVE signal frame the emulator works on. Calling it again while
// installed replaces the feature set. Not to be called while emulated code runs.
bool install(unsigned features, std::string* reason);
// Restores the previous SIGILL disposition.
void uninstall();

unsigned installed_features();
// Instructions emulated so far, all threads.
std::uint64_t emulated_instruction_count();

// The mnemonics the emulator implements, lower case, sorted.
std::vector<std::string_view> emulated_mnemonics();

}  // namespace qforge::emulate
