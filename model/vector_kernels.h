// The f32 vector loops of the executor's attention, 8 lanes at a time with AVX2 + FMA
// where the CPU has them (a scalar loop otherwise):
//
//   dot(a, b, n)              = sum_i a[i] * b[i]      (q . k of one head)
//   add_scaled(y, s, x, n):     y[i] += s * x[i]       (out += softmax weight * v)
//
// The sum is taken in 8 lanes x 2 accumulators, so it is not the sequential order's
// rounding (within n * eps of it).
#pragma once

namespace qforge {

float dot(const float* a, const float* b, int n);
void add_scaled(float* y, float s, const float* x, int n);

}  // namespace qforge
