// Test support: installs the instruction emulator for every kernel ISA this CPU lacks,
// so the generated zmm (AVX512-VNNI), ymm (AVX-VNNI) and AMX code runs here, and tells
// the ISA layer about it. Only tests (and an explicit CLI opt-in) do this.
#pragma once

#include <cstdio>
#include <string>

#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"

namespace qforge::test {

inline void enable_emulated_isas() {
  const unsigned missing = emulate::kAllFeatures & ~emulate::native_features();
  if (missing == 0) return;
  std::string reason;
  if (!emulate::install(missing, &reason)) {
    std::fprintf(stderr, "instruction emulator not installed: %s\n", reason.c_str());
    return;
  }
  IsaMask mask = 0;
  if (missing & emulate::kAvx512) mask |= isa_bit(Isa::avx512_vnni);
  if (missing & emulate::kAvxVnni) mask |= isa_bit(Isa::avx_vnni);
  // AMX kernels also run zmm code: native or emulated, it is there by now.
  if (missing & emulate::kAmx) mask |= isa_bit(Isa::amx);
  set_emulated_isa_mask(mask);
  std::fprintf(stderr, "instruction emulator installed for:%s%s%s\n",
               (missing & emulate::kAvx512) ? " avx512" : "",
               (missing & emulate::kAvxVnni) ? " avx-vnni" : "",
               (missing & emulate::kAmx) ? " amx" : "");
}

}  // namespace qforge::test
