// The loop that measures the machine's floating-point multiply-add peak, the limit the
// weight-only kernels (f32 activations) are judged against, generated with Xbyak so the
// instructions timed are exactly the ones named:
//
//   for i in 0 .. iterations:   acc[a] = op(acc[a], x, w)   for a in 0 .. A (in registers)
//   return the sum over a of acc[a] lane 0, converted to an integer
//
//   fma_ymm    vfmadd231ps ymm     8 multiply-adds a step   x = w = 1.0: lane += 1
//   fma_zmm    vfmadd231ps zmm    16                         lane += 1
//   bf16_zmm   vdpbf16ps zmm      32 (bf16 pairs)            x = w = bf16 1.0: lane += 2
//
// The sums are exact while a lane stays below 2^24 (tests check them to show the loop ran).
#pragma once

#include <cstdint>
#include <memory>

namespace qforge {

enum class FloatPeakKind { fma_ymm, fma_zmm, bf16_zmm };

class FloatPeakKernel {
 public:
  explicit FloatPeakKernel(FloatPeakKind kind);
  ~FloatPeakKernel();
  FloatPeakKernel(const FloatPeakKernel&) = delete;
  FloatPeakKernel& operator=(const FloatPeakKernel&) = delete;

  std::int64_t run(std::int64_t iterations) const;
  static constexpr int kAccumulators = 12;
  int multiply_adds_per_step() const;
  int lane_increment() const { return kind_ == FloatPeakKind::bf16_zmm ? 2 : 1; }

 private:
  struct Code;
  FloatPeakKind kind_;
  std::unique_ptr<Code> code_;
};

}  // namespace qforge
