// Kernel ISA levels, as one capability bitmask with one user cap.
//
//   reference < avx2 < avx-vnni < avx512-vnni < amx
//
// usable = (hardware has it, or the opt-in emulator provides it) and level <= cap.
// The cap comes from QFORGE_MAX_ISA (read once) or set_max_isa() (the CLI's --max-isa);
// every dispatch decision in qforge goes through isa_usable() / best_isa().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "jit/cpu/cpu_info.h"

namespace qforge {

enum class Isa : std::uint8_t { reference = 0, avx2, avx_vnni, avx512_vnni, amx };
inline constexpr int kIsaCount = 5;

using IsaMask = std::uint32_t;
constexpr IsaMask isa_bit(Isa isa) {
  return IsaMask{1} << static_cast<int>(isa);
}

// "avx2", "avx-vnni", "avx512-vnni", "amx" ("reference" for the scalar path).
std::string_view isa_name(Isa isa);
// Parses a user-facing name; throws qforge::Error listing the valid names.
Isa parse_isa(std::string_view name, std::string_view where = "ISA");
// "avx2|avx-vnni|avx512-vnni|amx"
std::string valid_isa_names();

// The levels whose instructions the hardware (and OS) can run.
IsaMask hardware_isa_mask(const CpuInfo& cpu);

// The cap in force (default: amx = no cap). Throws on a bad QFORGE_MAX_ISA value.
Isa max_isa();
void set_max_isa(Isa cap);

// Levels provided by the opt-in instruction emulator (tests, `--amx emulate`).
void set_emulated_isa_mask(IsaMask mask);
IsaMask emulated_isa_mask();

IsaMask usable_isa_mask();
bool isa_usable(Isa isa);
Isa best_isa();

}  // namespace qforge
