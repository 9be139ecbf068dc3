// The loop that measures the machine's int8 dot-product peak, generated with Xbyak so
// that the instructions timed are exactly the ones named (a compiler sees constant
// operands in an intrinsics loop and hoists the multiply out of it).
//
//   for i in 0 .. iterations:            accumulators acc[0 .. A) in registers
//     for a in 0 .. A:  acc[a] += dot4(x, w)   (one step = one vector of u8 x s8 quads)
//   return sum over a of acc[a] lane 0
//
// One step is `vpdpbusd zmm` (64 multiply-adds), `{vex} vpdpbusd ymm` (32) or the exact
// AVX2 sequence the ymm kernels use, vpsignb + vpmaddubsw + vpmaddwd + vpaddd (32).
// x and w are fixed (x = 5, w = 3), so each step adds 60 to every
// int32 lane of every accumulator (tests check it to show the loop ran).
#pragma once

#include <cstdint>
#include <memory>

namespace qforge {

enum class DotKind { zmm, ymm_vnni, avx2 };

class DotPeakKernel {
 public:
  explicit DotPeakKernel(DotKind kind);
  ~DotPeakKernel();
  DotPeakKernel(const DotPeakKernel&) = delete;
  DotPeakKernel& operator=(const DotPeakKernel&) = delete;

  // Runs the loop; returns the sum over accumulators of lane 0 (60 * A * iterations,
  // modulo 2^32 per accumulator).
  std::int64_t run(std::int64_t iterations) const;
  int accumulators() const { return accumulators_; }
  int multiply_adds_per_step() const { return kind_ == DotKind::zmm ? 64 : 32; }

 private:
  struct Code;
  DotKind kind_;
  int accumulators_;
  std::unique_ptr<Code> code_;
};

}  // namespace qforge
