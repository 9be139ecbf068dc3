#include "cli/amx_mode.h"

#include <cstdio>
#include <cstdlib>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"

namespace qforge::cli {

void apply_amx_mode(const std::string& mode) {
  std::string chosen = mode;
  const char* where = "--amx";
  if (chosen.empty()) {
    if (const char* value = std::getenv("QFORGE_AMX")) chosen = value;
    where = "QFORGE_AMX";
  }
  if (chosen.empty() || chosen == "off") return;
  QF_REQUIRE(chosen == "emulate", where, ": '", chosen, "' is not one of off|emulate");
  const CpuInfo& cpu = cpu_info();
  QF_REQUIRE(!(hardware_isa_mask(cpu) & isa_bit(Isa::amx)), where,
             "=emulate: this CPU runs AMX natively; the emulator is for CPUs without it");
  unsigned features = emulate::kAmx;
  if (!(emulate::native_features() & emulate::kAvx512)) features |= emulate::kAvx512;
  std::string reason;
  QF_REQUIRE(emulate::install(features, &reason), where,
             "=emulate: the instruction emulator cannot be installed: ", reason);
  IsaMask emulated = isa_bit(Isa::amx);
  if (features & emulate::kAvx512) emulated |= isa_bit(Isa::avx512_vnni);
  set_emulated_isa_mask(emulated_isa_mask() | emulated);
  std::fprintf(stderr,
               "qforge: %s=emulate: AMX%s instructions run under the SIGILL instruction "
               "emulator (slow; for checking the AMX path)\n",
               where, (features & emulate::kAvx512) ? " and AVX-512" : "");
}

}  // namespace qforge::cli
