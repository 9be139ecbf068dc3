#include "jit/emulate/host_cpu.h"

#include "jit/cpu/amx_permission.h"
#include "jit/cpu/cpuid.h"

namespace qforge::emulate {
namespace {

using qforge::cpuid;
using qforge::read_xcr0;
bool bit(unsigned value, int index) {
  return qforge::cpuid_bit(value, index);
}

// XSAVE state components (Intel SDM vol. 1, 13.1).
constexpr int kSseComponent = 1, kAvxComponent = 2;
constexpr int kOpmaskComponent = 5, kZmmHi256Component = 6, kHi16ZmmComponent = 7;
constexpr int kTileConfigComponent = 17, kTileDataComponent = 18;

}  // namespace

HostCpu probe_host_cpu() {
  HostCpu host;
  const unsigned max_leaf = cpuid(0, 0).eax;
  if (max_leaf < 0xD) return host;
  const CpuidResult leaf1 = cpuid(1, 0);
  const bool osxsave = bit(leaf1.ecx, 27), avx = bit(leaf1.ecx, 28);
  if (!osxsave || !avx) return host;
  const std::uint64_t xcr0 = read_xcr0();
  host.avx_state = bit(xcr0, kSseComponent) && bit(xcr0, kAvxComponent);
  if (!host.avx_state) return host;
  host.avx_offset = cpuid(0xD, kAvxComponent).ebx;

  const CpuidResult leaf7 = cpuid(7, 0);
  const bool os_zmm =
      bit(xcr0, kOpmaskComponent) && bit(xcr0, kZmmHi256Component) && bit(xcr0, kHi16ZmmComponent);
  host.avx512f = bit(leaf7.ebx, 16) && os_zmm;
  if (os_zmm) host.zmm_hi256_offset = cpuid(0xD, kZmmHi256Component).ebx;
  const bool os_tiles = bit(xcr0, kTileConfigComponent) && bit(xcr0, kTileDataComponent);
  host.amx = (bit(leaf7.edx, 24) || bit(leaf7.edx, 25)) && os_tiles &&
             qforge::request_amx_permission(nullptr);
  if (leaf7.eax >= 1) host.avx_vnni = bit(cpuid(7, 1).eax, 4);
  return host;
}

}  // namespace qforge::emulate
