#include "jit/cpu/isa.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "jit/base/error.h"

namespace qforge {
namespace {

constexpr std::array<std::string_view, kIsaCount> kNames = {"reference", "avx2", "avx-vnni",
                                                            "avx512-vnni", "amx"};

std::atomic<int> g_cap{-1};  // -1: not decided yet
std::atomic<IsaMask> g_emulated{0};

Isa cap_from_environment() {
  const char* value = std::getenv("QFORGE_MAX_ISA");
  if (!value || !*value) return Isa::amx;
  return parse_isa(value, "QFORGE_MAX_ISA");
}

}  // namespace

std::string_view isa_name(Isa isa) {
  return kNames[static_cast<int>(isa)];
}

std::string valid_isa_names() {
  return "avx2|avx-vnni|avx512-vnni|amx";
}

Isa parse_isa(std::string_view name, std::string_view where) {
  for (int i = 1; i < kIsaCount; ++i)
    if (kNames[i] == name) return static_cast<Isa>(i);
  fail(where, ": unknown ISA '", name, "' (valid: ", valid_isa_names(), ")");
}

IsaMask hardware_isa_mask(const CpuInfo& cpu) {
  const IsaFlags& f = cpu.isa;
  IsaMask mask = isa_bit(Isa::reference);
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  if (avx2) mask |= isa_bit(Isa::avx2);
  if (avx2 && f.avx_vnni) mask |= isa_bit(Isa::avx_vnni);
  if (avx2 && avx512 && f.avx512_vnni) mask |= isa_bit(Isa::avx512_vnni);
  if ((mask & isa_bit(Isa::avx512_vnni)) && cpu.amx_usable) mask |= isa_bit(Isa::amx);
  return mask;
}

Isa max_isa() {
  int cap = g_cap.load(std::memory_order_acquire);
  if (cap < 0) {
    cap = static_cast<int>(cap_from_environment());
    int expected = -1;
    g_cap.compare_exchange_strong(expected, cap);
    cap = g_cap.load();
  }
  return static_cast<Isa>(cap);
}

void set_max_isa(Isa cap) {
  g_cap.store(static_cast<int>(cap), std::memory_order_release);
}

void set_emulated_isa_mask(IsaMask mask) {
  g_emulated.store(mask);
}
IsaMask emulated_isa_mask() {
  return g_emulated.load();
}

IsaMask usable_isa_mask() {
  const IsaMask present = hardware_isa_mask(cpu_info()) | emulated_isa_mask();
  const IsaMask below_cap = (isa_bit(max_isa()) << 1) - 1;
  return present & below_cap;
}

bool isa_usable(Isa isa) {
  return usable_isa_mask() & isa_bit(isa);
}

Isa best_isa() {
  const IsaMask mask = usable_isa_mask();
  for (int i = kIsaCount - 1; i > 0; --i)
    if (mask & (IsaMask{1} << i)) return static_cast<Isa>(i);
  return Isa::reference;
}

}  // namespace qforge
