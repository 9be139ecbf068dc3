// RMSNorm, the normalization in front of every Llama linear input:
//
//   out[j] = weight[j] * (x[j] * 1 / sqrt(mean(x^2) + eps))      (run.c's order of rounding)
//
// One definition for the executor's f32 rows and for the quantizers that normalize a row
// in cache and write its int8 activations directly (quantize_normalized_rows).
#pragma once

#include <cstdint>

namespace qforge {

struct RmsNorm {
  const float* weight = nullptr;  // the row's K gains
  float eps = 1e-5f;
};

void rmsnorm(float* out, const float* x, const RmsNorm& norm, std::int64_t size);

}  // namespace qforge
