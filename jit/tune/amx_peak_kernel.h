// The loop that measures the machine's AMX-INT8 peak: tdpbsud, the instruction the AMX
// GEMM runs (s8 activations x u8 weights), generated with Xbyak so the instructions timed
// are exactly the ones named.
//
//   ldtilecfg: C tmm0-3 16 x 64 bytes (int32), A tmm4-5 16 x 64 (s8), B tmm6-7 16 x 64 (u8)
//   A <- 5, B <- 3, C <- 0
//   for i in 0 .. iterations:  C[2a + b] += A[4 + a] . B[6 + b]   (a, b in 0..1: four
//                              independent tdpbsud, 16 x 16 x 64 multiply-adds each)
//   return the sum of lane 0 of the four C tiles; tilerelease
//
// Each step adds 64 x 5 x 3 = 960 to every int32 lane of every C tile (tests check it to
// show the loop ran). The bf16 kind runs tdpbf16ps instead (the tile products of bf16
// pairs, 16 x 16 x 32 multiply-adds each) on A = B = bf16 1.0: each step adds 32 to
// every f32 lane (exact below 2^24). Running it needs AMX and the process's XTILEDATA permission
// (or the instruction emulator).
#pragma once

#include <cstdint>
#include <memory>

namespace qforge {

enum class AmxPeakKind { int8, bf16 };

class AmxPeakKernel {
 public:
  explicit AmxPeakKernel(AmxPeakKind kind = AmxPeakKind::int8);
  ~AmxPeakKernel();
  AmxPeakKernel(const AmxPeakKernel&) = delete;
  AmxPeakKernel& operator=(const AmxPeakKernel&) = delete;

  // Runs the loop; returns 4 x 960 x iterations (modulo 2^32 per tile lane), bf16:
  // 4 x 32 x iterations.
  std::int64_t run(std::int64_t iterations) const;
  static constexpr int kTileProducts = 4;  // tdpbsud per step
  static constexpr int kMultiplyAddsPerProduct = 16 * 16 * 64;
  static constexpr int multiply_adds_per_product(AmxPeakKind kind) {
    return kind == AmxPeakKind::bf16 ? 16 * 16 * 32 : kMultiplyAddsPerProduct;
  }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
};

}  // namespace qforge
