// --amx MODE, or QFORGE_AMX when MODE is empty: how the AMX kernels may run.
//
//   "" | off   AMX kernels only where the CPU and OS run AMX (the default)
//   emulate    on a CPU without AMX, run them through the SIGILL instruction emulator
//              (jit/emulate; AVX-512 too when missing, as the AMX kernels dequantize on zmm):
//              slow, for checking the AMX path end to end. Refused where AMX runs natively.
//
// The emulator is never installed otherwise; when it is, one line on stderr says so.
#pragma once

#include <string>

namespace qforge::cli {

void apply_amx_mode(const std::string& mode);

}  // namespace qforge::cli
