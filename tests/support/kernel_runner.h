// Runs one generated GEMM kernel over a problem and checks it against ops/ref:
// poisoned outputs with guard bytes, int32 group sums bit-exact, floats to 1e-6.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jit/gemm/gemm_key.h"
#include "ops/quant/activation.h"
#include "ops/quant/pack.h"

namespace qforge::test {

struct KernelCase {
  Isa isa = Isa::avx2;
  std::int64_t m = 1, n = 16, k = 64;
  QuantScheme scheme;
  Epilogue epilogue;
  std::uint64_t seed = 1;
  Blocking blocking{};  // mr == 0: default for the bucket
  bool default_blocking = true;
  int unit_splits = 1;  // call the kernel on this many unit ranges (as threads would)
  // int4 asymmetric only: float offsets (GGUF Q4_1 minima) in place of integer zero points
  bool float_offsets = false;
  // weight-only int4 on zmm only: bf16 activations (the vdpbf16ps kernels)
  bool bf16 = false;
  // weight-only zmm GEMVs: four accumulator chains (GemmKey::woq_chains) forced on (1) or
  // off (0); -1: as gemm_key_for decides for this CPU
  int woq_chains = -1;
  // weight-only only: each row split into this many s8 digit rows (2 or 3; the split keys
  // s8x2 / s8x3, ops/quant/split_activations.h), checked against the f32 rows' reference
  int split_digits = 0;
};

std::string describe(const KernelCase& c);

// Returns "" when the kernel matches the reference, else a description of the mismatch.
std::string check_kernel(const KernelCase& c);

// The key ops/linear would build for this case.
GemmKey key_for(const KernelCase& c, const PackedHeader& header);

// Epilogue number i % 8: none, bias, residual, SwiGLU, u8, group sums, bias + residual,
// SwiGLU + u8. (SwiGLU + residual in f32 is left out: the residual can cancel
// silu(gate) * up, whose expf differs from std::exp in the last bits, so a relative
// tolerance on the sum does not hold.)
Epilogue epilogue_number(int i);

}  // namespace qforge::test
