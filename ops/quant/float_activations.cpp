#include "ops/quant/float_activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "jit/cpu/cpu_info.h"
#include "jit/gemm/woq_fields.h"

namespace qforge {
namespace {

// 2^-e for each k of a packed row (e = woq_activation_exponent), powers of two: exact.
struct FieldScales {
  float factor[8];
  explicit FieldScales(int bits) {
    for (int i = 0; i < woq_fields_per_row(bits); ++i)
      factor[i] = std::ldexp(1.f, -woq_activation_exponent(bits, i));
  }
};

// Where k = 8 p + field of a packed row sits in a bf16 row: (pair, half) -> 8 p + 2 pair + half.
struct PairSlots {
  int slot[8];
  PairSlots() {
    for (int j = 0; j < kWoqBf16Pairs; ++j)
      for (int half = 0; half < 2; ++half) slot[woq_bf16_pair_field(j, half)] = 2 * j + half;
  }
};
const PairSlots kPairSlots;

// sums[j] = v[j g] + v[j g + 1] + ... in float, k in order within the group (the last
// group ends at k), 0 for groups past k. The groups' sums are independent chains, so
// they advance together, one k of every full group per step.
void sum_groups(const float* v, std::int64_t k, std::int64_t g, std::int64_t groups, float* sums) {
  const std::int64_t full = k / g;
  std::fill(sums, sums + groups, 0.f);
  if (full > 1) {
    for (std::int64_t i = 0; i < g; ++i)
      for (std::int64_t j = 0; j < full; ++j) sums[j] += v[j * g + i];
  } else if (full == 1) {
    for (std::int64_t i = 0; i < g; ++i) sums[0] += v[i];
  }
  for (std::int64_t i = full * g; i < k; ++i) sums[full] += v[i];
}

// dst[i] = src[i] * 2^-e of k's field (i mod F), a packed row of F k at a time (a fixed F
// lets the compiler keep the row's factors in a register; an integer modulo per value
// cost a decode call more time than its whole bf16 conversion).
template <int F>
void scale_fields(const float* src, std::int64_t k, const FieldScales& scales, float* dst) {
  std::int64_t i = 0;
  for (; i + F <= k; i += F)
    for (int f = 0; f < F; ++f) dst[i + f] = src[i + f] * scales.factor[f];
  for (int f = 0; i < k; ++i, ++f) dst[i] = src[i] * scales.factor[f];
}

// Eight values of x to bf16 (f32_to_bf16: nearest even, NaNs kept quiet) in the pair
// order of a packed row (woq_fields.h), and back to f32 in k order.
__attribute__((target("avx2"))) void round_eight_avx2(const float* x, std::uint16_t* pairs,
                                                      float* rounded) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i half = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  half = _mm256_blendv_epi8(half, quiet, nan);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(rounded), _mm256_slli_epi32(half, 16));
  // words k0..k7 (packus interleaves the 128-bit lanes: qwords 0 and 2), then the slots
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(half, half), 0x08);
  const __m128i order = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(pairs),
                   _mm_shuffle_epi8(_mm256_castsi256_si128(packed), order));
}

// x[0, k) to bf16 pairs at `pairs` (a partial last packed row's other slots are left as
// they are) and their f32 values at rounded[0, k).
void round_to_bf16_pairs(const float* x, std::int64_t k, std::uint16_t* pairs, float* rounded) {
  std::int64_t i = 0;
  if (cpu_info().isa.avx2)
    for (; i + 8 <= k; i += 8) round_eight_avx2(x + i, pairs + i, rounded + i);
  for (; i < k; ++i) {
    const std::uint16_t v = f32_to_bf16(x[i]);
    pairs[i / 8 * 8 + kPairSlots.slot[i % 8]] = v;
    rounded[i] = bf16_to_f32(v);
  }
}

}  // namespace

float FloatActivations::value(std::int64_t r, std::int64_t i) const {
  if (bf16) return bf16_to_f32(pair_row(r)[i / 8 * 8 + kPairSlots.slot[i % 8]]);
  const int fields = woq_fields_per_row(bits);
  return std::ldexp(row(r)[i], woq_activation_exponent(bits, static_cast<int>(i % fields)));
}

void prepare_float_activations(FloatActivations& out, std::int64_t m, std::int64_t k,
                               std::int64_t k_padded, std::int64_t group, int bits, bool bf16) {
  QF_REQUIRE(m > 0 && k > 0 && group > 0 && k_padded >= k && k_padded % group == 0 &&
                 (bits == 8 || bits == 4) && group % woq_fields_per_row(bits) == 0,
             "activations: bad shape M ", m, ", K ", k, ", Kp ", k_padded, ", g ", group, ", bits ",
             bits);
  QF_REQUIRE(!bf16 || bits == 4, "activations: bf16 pairs are laid out for int4 weights");
  if (out.m == m && out.k == k && out.k_padded == k_padded && out.group == group &&
      out.bits == bits && out.bf16 == bf16)
    return;
  out.bits = bits;
  out.bf16 = bf16;
  const std::int64_t stride =
      static_cast<std::int64_t>(round_up(k_padded * (bf16 ? 2 : 4), kCacheLine));
  out.m = m;
  out.k = k;
  out.k_padded = k_padded;
  out.group = group;
  out.row_stride = stride;
  // The buffers only grow, so one scratch serves layers of every shape without
  // reallocating; copy_float_activation_rows writes each row's padding.
  const auto sums = static_cast<std::size_t>(m * (k_padded / group));
  if (bf16) {
    const auto values = static_cast<std::size_t>(m * stride / 2);
    if (out.pairs.size() < values) out.pairs.resize_for_overwrite(values);
  } else {
    const auto floats = static_cast<std::size_t>(m * stride / 4);
    if (out.x.size() < floats) out.x.resize_for_overwrite(floats);
  }
  if (out.group_sums.size() < sums) out.group_sums.resize_for_overwrite(sums);
}

void copy_float_activation_rows(const float* x, std::int64_t ldx, std::int64_t first,
                                std::int64_t count, FloatActivations& out) {
  QF_REQUIRE(first >= 0 && count >= 0 && first + count <= out.m, "activations: rows [", first, ", ",
             first + count, ") outside the ", out.m, " prepared");
  if (out.bf16) {
    thread_local std::vector<float> rounded;  // the row's bf16 values, k in order
    if (rounded.size() < static_cast<std::size_t>(out.k)) rounded.resize(std::size_t(out.k));
    for (std::int64_t r = first; r < first + count; ++r) {
      std::uint16_t* dst = out.pairs.data() + r * (out.row_stride / 2);
      // zeros from the packed row of k on (the conversion fills that row's slots of k)
      std::fill(dst + out.k / 8 * 8, dst + out.k_padded, std::uint16_t{0});
      round_to_bf16_pairs(x + r * ldx, out.k, dst, rounded.data());
      sum_groups(rounded.data(), out.k, out.group, out.groups(),
                 out.group_sums.data() + r * out.groups());
    }
    return;
  }
  const FieldScales scales(out.bits);
  for (std::int64_t r = first; r < first + count; ++r) {
    const float* src = x + r * ldx;
    float* dst = out.x.data() + r * (out.row_stride / 4);
    if (woq_fields_per_row(out.bits) == 8)
      scale_fields<8>(src, out.k, scales, dst);
    else
      scale_fields<4>(src, out.k, scales, dst);
    std::memset(dst + out.k, 0, static_cast<std::size_t>(out.k_padded - out.k) * sizeof(float));
    sum_groups(src, out.k, out.group, out.groups(), out.group_sums.data() + r * out.groups());
  }
}

void set_call_operand(GemmCallArgs& call, const FloatActivations& x) {
  if (x.bf16)
    call.a_bf16 = x.pairs.data();
  else
    call.a_f32 = x.x.data();
  call.a_f32_sums = x.group_sums.data();
}

}  // namespace qforge
