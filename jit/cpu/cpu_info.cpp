#include "jit/cpu/cpu_info.h"

#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "jit/cpu/amx_permission.h"
#include "jit/cpu/cpuid.h"

namespace qforge {
namespace {

using Regs = CpuidResult;
bool bit(unsigned value, int index) {
  return cpuid_bit(value, index);
}
std::uint64_t xgetbv0() {
  return read_xcr0();
}

// XCR0 state components (Intel SDM vol. 1, 13.1).
constexpr std::uint64_t kXcr0Sse = 1u << 1, kXcr0Avx = 1u << 2;
constexpr std::uint64_t kXcr0Opmask = 1u << 5, kXcr0ZmmHi256 = 1u << 6, kXcr0Hi16Zmm = 1u << 7;
constexpr std::uint64_t kXcr0TileCfg = 1u << 17, kXcr0TileData = 1u << 18;

void read_identity(CpuInfo& info, unsigned max_leaf) {
  const Regs r0 = cpuid(0);
  char vendor[13] = {};
  std::memcpy(vendor + 0, &r0.ebx, 4);
  std::memcpy(vendor + 4, &r0.edx, 4);
  std::memcpy(vendor + 8, &r0.ecx, 4);
  info.vendor = vendor;
  if (max_leaf < 1) return;
  const unsigned eax = cpuid(1).eax;
  const int base_family = (eax >> 8) & 0xf, ext_family = (eax >> 20) & 0xff;
  const int base_model = (eax >> 4) & 0xf, ext_model = (eax >> 16) & 0xf;
  info.family = base_family == 0xf ? base_family + ext_family : base_family;
  info.model =
      (base_family == 0x6 || base_family == 0xf) ? (ext_model << 4) + base_model : base_model;
  info.stepping = eax & 0xf;

  if (cpuid(0x80000000).eax >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i + 0, &r.eax, 4);
      std::memcpy(brand + 16 * i + 4, &r.ebx, 4);
      std::memcpy(brand + 16 * i + 8, &r.ecx, 4);
      std::memcpy(brand + 16 * i + 12, &r.edx, 4);
    }
    std::string text = brand;
    const auto first = text.find_first_not_of(' ');
    const auto last = text.find_last_not_of(' ');
    info.brand = first == std::string::npos ? "" : text.substr(first, last - first + 1);
  }
}

void read_isa(IsaFlags& isa, unsigned max_leaf) {
  if (max_leaf < 1) return;
  const Regs r1 = cpuid(1);
  const bool osxsave = bit(r1.ecx, 27);
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  isa.os_ymm = (xcr0 & (kXcr0Sse | kXcr0Avx)) == (kXcr0Sse | kXcr0Avx);
  isa.os_zmm = isa.os_ymm && (xcr0 & (kXcr0Opmask | kXcr0ZmmHi256 | kXcr0Hi16Zmm)) ==
                                 (kXcr0Opmask | kXcr0ZmmHi256 | kXcr0Hi16Zmm);
  isa.os_tile = (xcr0 & (kXcr0TileCfg | kXcr0TileData)) == (kXcr0TileCfg | kXcr0TileData);

  const bool avx = bit(r1.ecx, 28) && isa.os_ymm;
  isa.fma = avx && bit(r1.ecx, 12);
  isa.f16c = avx && bit(r1.ecx, 29);
  if (max_leaf < 7) return;
  const Regs r7 = cpuid(7, 0);
  const Regs r7s1 = cpuid(7, 1);
  isa.avx2 = avx && bit(r7.ebx, 5);
  isa.avx512f = isa.os_zmm && bit(r7.ebx, 16);
  isa.avx512dq = isa.avx512f && bit(r7.ebx, 17);
  isa.avx512bw = isa.avx512f && bit(r7.ebx, 30);
  isa.avx512vl = isa.avx512f && bit(r7.ebx, 31);
  isa.avx512_vnni = isa.avx512f && bit(r7.ecx, 11);
  isa.avx512_fp16 = isa.avx512f && bit(r7.edx, 23);
  isa.avx512_bf16 = isa.avx512f && bit(r7s1.eax, 5);
  isa.avx_vnni = isa.avx2 && bit(r7s1.eax, 4);
  isa.amx_bf16 = bit(r7.edx, 22);
  isa.amx_tile = bit(r7.edx, 24);
  isa.amx_int8 = bit(r7.edx, 25);
}

// Cache sizes: Intel deterministic cache parameters (leaf 4), AMD's (0x8000001D),
// falling back to AMD's legacy leaves 0x80000005/6.
void read_caches(CpuInfo& info, unsigned max_leaf) {
  const unsigned max_ext = cpuid(0x80000000).eax;
  unsigned leaf = 0;
  if (info.vendor == "GenuineIntel" && max_leaf >= 4) leaf = 4;
  if (info.vendor != "GenuineIntel" && max_ext >= 0x8000001D) leaf = 0x8000001D;
  if (leaf != 0) {
    for (unsigned sub = 0; sub < 16; ++sub) {
      const Regs r = cpuid(leaf, sub);
      const unsigned type = r.eax & 0x1f;  // 0 = no more caches, 1 data, 2 code, 3 unified
      if (type == 0) break;
      const unsigned level = (r.eax >> 5) & 0x7;
      const std::uint64_t ways = ((r.ebx >> 22) & 0x3ff) + 1;
      const std::uint64_t partitions = ((r.ebx >> 12) & 0x3ff) + 1;
      const std::uint64_t line = (r.ebx & 0xfff) + 1;
      const std::uint64_t sets = std::uint64_t{r.ecx} + 1;
      const std::uint64_t bytes = ways * partitions * line * sets;
      if (level == 1 && type == 1) info.l1d_bytes = bytes;
      if (level == 2 && type != 2) info.l2_bytes = bytes;
      if (level == 3 && type != 2) info.l3_bytes = bytes;
    }
  }
  if (info.l2_bytes == 0 && max_ext >= 0x80000006) {
    const Regs r = cpuid(0x80000006);
    info.l2_bytes = std::uint64_t{(r.ecx >> 16) & 0xffff} << 10;
    info.l3_bytes = std::uint64_t{(r.edx >> 18) & 0x3fff} << 19;
    if (max_ext >= 0x80000005) info.l1d_bytes = std::uint64_t{cpuid(0x80000005).ecx >> 24} << 10;
  }
}

// Physical cores = distinct (package, core) pairs among the CPUs this process may run on.
void read_core_counts(CpuInfo& info) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    info.threads = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    info.cores = info.threads;
    return;
  }
  info.threads = CPU_COUNT(&set);
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = -1;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    cores.insert({package, core < 0 ? cpu : core});
  }
  info.cores = cores.empty() ? info.threads : static_cast<int>(cores.size());
}

// AMX needs all three: CPUID, XCR0 tile state, and the kernel's permission.
void decide_amx(CpuInfo& info) {
  std::string reason;
  const bool permitted = request_amx_permission(&reason);
  std::string why;
  auto add = [&why](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (!(info.isa.amx_tile && info.isa.amx_int8)) add("CPUID reports no AMX-TILE/AMX-INT8");
  if (!info.isa.os_tile) add("XCR0 does not enable tile state (XTILECFG/XTILEDATA)");
  if (!permitted) add(reason);
  info.amx_usable = why.empty();
  info.amx_reason = why.empty() ? "ok" : why;
}

}  // namespace

CpuInfo detect_cpu() {
  CpuInfo info;
  const unsigned max_leaf = cpuid(0).eax;
  read_identity(info, max_leaf);
  read_isa(info.isa, max_leaf);
  read_caches(info, max_leaf);
  read_core_counts(info);
  decide_amx(info);
  return info;
}

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect_cpu();
  return info;
}

}  // namespace qforge
