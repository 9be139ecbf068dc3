// The two raw instructions every CPU query in qforge starts from: CPUID and XGETBV(0).
#pragma once

#include <cpuid.h>

#include <cstdint>

namespace qforge {

struct CpuidResult {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

inline CpuidResult cpuid(unsigned leaf, unsigned subleaf = 0) {
  CpuidResult r;
  __cpuid_count(leaf, subleaf, r.eax, r.ebx, r.ecx, r.edx);
  return r;
}

inline bool cpuid_bit(unsigned value, int index) {
  return (value >> index) & 1u;
}

// XCR0: which register states the OS saves (needs CPUID.1:ECX.OSXSAVE).
inline std::uint64_t read_xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t{hi} << 32) | lo;
}

}  // namespace qforge
