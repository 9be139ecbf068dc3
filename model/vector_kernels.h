// The f32 vector loops of the executor's attention, 8 lanes at a time with AVX2 + FMA
// where the CPU has them (a scalar loop otherwise). One call covers every cached position
// of a head, k and v rows `stride` floats apart:
//
//   dot_rows:      scores[p] = (sum_i q[i] * k[p * stride + i]) / divisor     p < count
//   weighted_rows: y[i]      =  sum_p w[p] * v[p * stride + i]                i < n
//   softmax:       x[p]      =  exp(x[p] - max) / sum_p' exp(x[p'] - max)      p < count
//
// A dot's sum is taken in 8 lanes x 2 accumulators, so it is not the sequential order's
// rounding (within n * eps of it). weighted_rows keeps y in registers across positions
// (64 columns at a time) and adds the positions in order, one fma each. dot_rows reduces
// four rows' sums together. softmax's exp is a polynomial within 2 ulp of exp's.
#pragma once

#include <cstdint>

namespace qforge {

void dot_rows(const float* q, const float* k, std::int64_t stride, int count, int n, float divisor,
              float* scores);
void weighted_rows(const float* w, const float* v, std::int64_t stride, int count, int n, float* y);
void softmax(float* x, int count);

}  // namespace qforge
