// What a GEMM/GEMV kernel does with each output after dequantization, in this order:
//
//   y = a[m] * sum_j scale[n][j] * C[m][n][j]            (dequantize, always)
//   y += bias[n]                                         (bias)
//   y = silu(y_gate) * y_up                              (swiglu: interleaved panel pair)
//   y += residual[m][n]                                  (residual)
//   store f32, or u8 = clamp(round(y / out_scale) + out_zero_point, 0, 255)   (output)
//
// group_sums is a test-only output: the corrected int32 C[m][n][j] themselves.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>

namespace qforge {

enum class OutputKind : std::uint8_t { f32 = 0, u8, group_sums };

struct Epilogue {
  bool bias = false;
  bool swiglu = false;
  bool residual = false;
  OutputKind output = OutputKind::f32;

  auto fields() const { return std::tuple(bias, swiglu, residual, output); }
  bool operator==(const Epilogue& other) const { return fields() == other.fields(); }
};

// Run-time operands of the epilogue.
struct EpilogueArgs {
  const float* bias = nullptr;      // N
  const float* residual = nullptr;  // M x ld_residual
  std::int64_t ld_residual = 0;
  float out_scale = 1.f;  // u8 output: y / out_scale + out_zero_point
  std::int32_t out_zero_point = 0;
};

// "deq-f32", "deq-bias-f32", "deq-swiglu-res-f32", "deq-u8", "deq-sums"
std::string epilogue_name(const Epilogue& e);

}  // namespace qforge
