// The CPU signature a tuning database belongs to: measurements only transfer between
// machines that agree on all of it.
//
//   AuthenticAMD-25-1-1_avx2_c2_l2-512k   (several ISA levels: avx2.avx-vnni.avx512-vnni)
//   vendor  family model stepping | kernel ISA levels the hardware runs | cores | L2 per core
//
// Only [A-Za-z0-9._-] appear, so the signature is also the database's file name.
#pragma once

#include <filesystem>
#include <string>

#include "jit/cpu/cpu_info.h"

namespace qforge {

std::string cpu_signature(const CpuInfo& cpu);
// This machine's signature (the ISA levels are hardware facts: no cap, no emulator).
const std::string& cpu_signature();

// $XDG_CACHE_HOME/qforge/tuning/<signature>.json, else ~/.cache/qforge/tuning/...
std::filesystem::path default_tuning_path(const std::string& signature = cpu_signature());

}  // namespace qforge
