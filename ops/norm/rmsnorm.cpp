#include "ops/norm/rmsnorm.h"

#include <cmath>

namespace qforge {

void rmsnorm(float* out, const float* x, const RmsNorm& norm, std::int64_t size) {
  float ss = 0.f;
  for (std::int64_t j = 0; j < size; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(size);
  ss += norm.eps;
  ss = 1.f / std::sqrt(ss);
  for (std::int64_t j = 0; j < size; ++j) out[j] = norm.weight[j] * (ss * x[j]);
}

}  // namespace qforge
