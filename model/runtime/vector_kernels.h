// The f32 vector loops of the executor's attention, 8 lanes at a time with AVX2 + FMA + F16C
// where the CPU has them (a scalar loop otherwise). One call covers every cached position
// of a head, k and v rows `stride` floats apart:
//
//   dot_rows:      scores[p] = (sum_i q[i] * k[p * stride + i]) / divisor     p < count
//   weighted_rows: y[i]     (+)= sum_p w[p] * v[p * stride + i]               i < n
//                  (+= with `accumulate`: y's values start the sums, so a run of positions
//                  split into consecutive blocks gives the same floats as one call)
//   softmax:       x[p]      =  exp(x[p] - max) / sum_p' exp(x[p'] - max)      p < count
//
// dot_rows takes four rows at a time, each row's sum in one 8-lane accumulator and the
// four reduced together (rows left over: two accumulators each), so it is not the
// sequential order's rounding (within n * eps of it). weighted_rows keeps y in registers
// across positions (64 columns at a time) and adds the positions in order, one fma each.
// softmax's exp is a degree-7 polynomial after range reduction, within a few float
// roundings of exp in double (test_vector_kernels checks the bound).
//
// The KvRows forms read the cache's rows in its type (model/kv_rows.h): bf16 and int8
// values widen to f32 exactly in registers; an int8 row's scale multiplies its dot
// product (dot_rows) or its weight (weighted_rows), so the sums run on the stored bytes
// (a quarter of f32's). The executor decodes each block of bf16 / int8 rows once
// (decode_rows, into L1) and runs the f32 forms on it for every head of a GQA group. The
// *_reference forms are the scalar definitions (each value
// decoded, sequential sums), used where the CPU lacks AVX2.
#pragma once

#include <cstdint>

#include "model/runtime/kv_rows.h"

namespace qforge {

void dot_rows(const float* q, const KvRows& k, int count, int n, float divisor, float* scores);
void weighted_rows(const float* w, const KvRows& v, int count, int n, bool accumulate, float* y);
void dot_rows_reference(const float* q, const KvRows& k, int count, int n, float divisor,
                        float* scores);
void weighted_rows_reference(const float* w, const KvRows& v, int count, int n, bool accumulate,
                             float* y);
// int8 keys with per-channel scales (KIVI, kv_rows.h) without decoding them: for the rows
// of each rounded group g, q is scaled by the group's channel scales and rounded to int8,
//
//   a[c] = nearest-even(q[c] s_g[c] / t),  t = max_c |q[c] s_g[c]| / 127   (quantize_query)
//   scores[p] = t * (sum_c a[c] k_q[p][c]) / divisor                   (int32 sum, exact)
//
// so the q.k of the int8 rows is an integer dot product (vpmaddubsw with AVX2); rows
// from exact_from on are the f32 dot_rows. The rounding of q is the only difference
// from decoding the keys.
struct QuantizedQuery {
  float scale;  // t
};
QuantizedQuery quantize_query(const float* q, const float* channel_scales, int n, std::int8_t* a);
void dot_rows_int8_keys(const float* q, const KvRows& k, int count, int n, float divisor,
                        float* scores);
// Rows [0, count) of `rows` (n values each) decoded to f32, row-major, into `out`.
void decode_rows(const KvRows& rows, int count, int n, float* out);
// Value i of row p, decoded.
float kv_value(const KvRows& rows, int p, int i);

void dot_rows(const float* q, const float* k, std::int64_t stride, int count, int n, float divisor,
              float* scores);
void weighted_rows(const float* w, const float* v, std::int64_t stride, int count, int n,
                   bool accumulate, float* y);
void softmax(float* x, int count);

}  // namespace qforge
