// What this CPU runs natively and where the kernel puts vector state in a signal frame,
// read once by install() (never from the signal handler).
#pragma once

#include <cstdint>

namespace qforge::emulate {

struct HostCpu {
  bool avx_state = false;  // OSXSAVE set and XCR0 enables SSE + AVX state
  bool avx512f = false;    // EVEX instructions run natively (CPUID and XCR0)
  bool avx_vnni = false;   // VEX vpdpbusd & co. run natively
  // Tile instructions run natively in this process: CPUID reports AMX-TILE or AMX-INT8,
  // XCR0 enables the tile state and Linux grants XTILEDATA (requested by the probe).
  // Otherwise they raise #UD, which the emulator handles.
  bool amx = false;
  std::uint32_t avx_offset = 0;        // XSAVE AVX component (ymm bits 255:128), CPUID 0xD.2
  std::uint32_t zmm_hi256_offset = 0;  // XSAVE ZMM_Hi256 component, 0 when not enabled
};

HostCpu probe_host_cpu();

}  // namespace qforge::emulate
