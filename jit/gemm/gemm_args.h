// The one argument of every generated GEMM/GEMV kernel: void kernel(const GemmCallArgs*).
//
// The kernel computes output units [unit_begin, unit_end) for rows [0, m):
//   a unit = 16 output columns = one packed panel (two for an interleaved SwiGLU pair)
//   A row r  : a + r * a_stride            (the s8 bytes xq: ops/quant/activation.h;
//                                           a_stride is fixed by K and g)
//              a_f32 + r * a_stride bytes  (weight-only kernels: the f32 rows,
//                                           ops/quant/float_activations.h)
//              a_bf16 + r * a_stride bytes (bf16 weight-only kernels: pairs, woq_fields.h)
//   C row r  : c + r * c_stride            (elements of the output type)
// Pointers a, a_scale, a_sums, c and residual address row 0; b, c, bias and residual
// address column 0 of the whole matrix (the kernel adds the unit offset itself).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qforge {

struct GemmCallArgs {
  const std::int8_t* a = nullptr;         // quantized activations (s8 xq)
  const float* a_scale = nullptr;         // per row
  const std::int32_t* a_sums = nullptr;   // per row x group: sum of xq
  const float* a_f32 = nullptr;           // weight-only kernels: f32 rows (padded to Kp)
  const float* a_f32_sums = nullptr;      // weight-only kernels: per row x group: sum of x
  const std::uint16_t* a_bf16 = nullptr;  // bf16 weight-only kernels: rows of bf16 pairs
  const std::uint8_t* b = nullptr;        // packed weights, panel 0
  void* c = nullptr;                      // output, row 0 column 0
  const float* bias = nullptr;            // N
  const float* residual = nullptr;        // row 0 column 0
  std::int64_t c_stride = 0;              // elements between output rows
  std::int64_t residual_stride = 0;       // elements between residual rows
  std::int64_t m = 0;                     // rows
  std::int64_t unit_begin = 0;            // first output unit (16 columns)
  std::int64_t unit_end = 0;              // one past the last
  float out_scale = 1.f;                  // u8 output: clamp(round(y / out_scale) + zp)
  float out_zero_point = 0.f;
};

using GemmKernelFn = void (*)(const GemmCallArgs*);

// How a call is shared by threads (ops/linear/call_split.h): by output units, every
// thread reading its own panels for all rows, or by rows, every thread reading all panels
// for its rows. A tuning parameter of large-M calls.
enum class ThreadSplit : std::uint8_t { units, rows };

}  // namespace qforge
