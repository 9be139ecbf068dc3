// What the CPU is and what it can run: CPUID + XGETBV + the kernel's AMX permission.
//
//   detect_cpu()  ->  CpuInfo { vendor, family/model/stepping, brand, IsaFlags, caches,
//                               cores, amx_usable + why }
//
// IsaFlags are raw hardware facts (CPUID bit set AND the OS saves the register state).
// Which kernels qforge may use is decided in jit/cpu/isa.h from these flags and the
// user's cap (QFORGE_MAX_ISA).
#pragma once

#include <cstdint>
#include <string>

namespace qforge {

struct IsaFlags {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  bool os_ymm = false;   // XCR0 enables SSE + AVX state
  bool os_zmm = false;   // XCR0 enables opmask + ZMM_Hi256 + Hi16_ZMM state
  bool os_tile = false;  // XCR0 enables XTILECFG + XTILEDATA state
};

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  std::string brand;   // "Intel(R) Xeon(R) Platinum 8480+" ...
  int family = 0;      // display family (base + extended)
  int model = 0;       // display model (base + extended << 4 where applicable)
  int stepping = 0;
  IsaFlags isa;
  std::uint64_t l1d_bytes = 0;
  std::uint64_t l2_bytes = 0;  // per core
  std::uint64_t l3_bytes = 0;  // total
  int cores = 0;               // physical cores available to this process
  int threads = 0;             // logical CPUs available to this process
  bool amx_usable = false;     // CPUID + XCR0 + arch_prctl permission all say yes
  std::string amx_reason;      // why not (or "ok")
};

// Detected once per process; cheap to call afterwards.
const CpuInfo& cpu_info();

// Fresh detection (tests).
CpuInfo detect_cpu();

}  // namespace qforge
