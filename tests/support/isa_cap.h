// Test support: caps the kernel ISA for one scope (QFORGE_MAX_ISA's effect), so a test
// whose expectations belong to one kernel family (the vector GEMV/GEMM tuning, say)
// gets that family on every host, AMX ones included.
#pragma once

#include "jit/cpu/isa.h"

namespace qforge::test {

class ScopedIsaCap {
 public:
  explicit ScopedIsaCap(Isa cap) : saved_(max_isa()) { set_max_isa(cap); }
  ~ScopedIsaCap() { set_max_isa(saved_); }
  ScopedIsaCap(const ScopedIsaCap&) = delete;
  ScopedIsaCap& operator=(const ScopedIsaCap&) = delete;

 private:
  Isa saved_;
};

}  // namespace qforge::test
