// The host side of the SIMD floating-point environment. The handler runs each emulated
// float instruction with the host thread's MXCSR set to the interrupted thread's (all
// exceptions masked, flags cleared, RC replaced by EVEX embedded rounding), so that plain
// float arithmetic compiled from C++ (scalar SSE, never x87) rounds, flushes (FTZ) and
// treats denormal inputs (DAZ) exactly as the emulated instruction would.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

#include "jit/emulate/operation.h"

namespace qforge::emulate {

inline std::uint32_t host_mxcsr() {
  return _mm_getcsr();
}
inline void set_host_mxcsr(std::uint32_t value) {
  _mm_setcsr(value);
}

inline void set_host_rounding(unsigned rounding) {
  set_host_mxcsr((host_mxcsr() & ~kMxcsrRounding) | (rounding << kMxcsrRoundingShift));
}

// Host MXCSR for emulating `op`: the guest's controls, exceptions masked, flags clear.
inline std::uint32_t host_mxcsr_for(const Operation& op) {
  const std::uint32_t mxcsr = (op.guest_mxcsr() & ~(kMxcsrFlags | kMxcsrRounding)) | kMxcsrMasks;
  return mxcsr | (op.rounding_control() << kMxcsrRoundingShift);
}

}  // namespace qforge::emulate
