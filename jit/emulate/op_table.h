// The emulated instruction set: one table per family, each entry a mnemonic and the
// function that emulates it. Adding an instruction is adding one line to its family's
// table (and its test). The handler merges the tables into a lookup by mnemonic.
#pragma once

#include <Zydis/Zydis.h>

#include <span>

#include "jit/emulate/operation.h"

namespace qforge::emulate {

using EmulateFn = Status (*)(Operation&);

struct OpEntry {
  ZydisMnemonic mnemonic;
  EmulateFn emulate;
};

std::span<const OpEntry> vnni_ops();     // vnni_ops.cpp: VEX and EVEX vpdp*
std::span<const OpEntry> move_ops();     // move_ops.cpp: moves, broadcasts, extract/insert
std::span<const OpEntry> integer_ops();  // integer_ops.cpp: EVEX integer ALU
std::span<const OpEntry> permute_ops();  // permute_ops.cpp: shuffles, packs, widen/narrow
std::span<const OpEntry> float_ops();    // float_ops.cpp: EVEX float ALU
std::span<const OpEntry> convert_ops();  // convert_ops.cpp: int/fp16/bf16 conversions
std::span<const OpEntry> opmask_ops();   // opmask_ops.cpp: VEX k-register instructions
std::span<const OpEntry> amx_ops();      // amx_ops.cpp: tiles

}  // namespace qforge::emulate
