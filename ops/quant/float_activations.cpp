#include "ops/quant/float_activations.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
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
    for (std::int64_t r = first; r < first + count; ++r) {
      const float* src = x + r * ldx;
      std::uint16_t* dst = out.pairs.data() + r * (out.row_stride / 2);
      float* sums = out.group_sums.data() + r * out.groups();
      std::fill(sums, sums + out.groups(), 0.f);
      for (std::int64_t i = 0; i < out.k_padded; ++i) {
        const std::uint16_t v = i < out.k ? f32_to_bf16(src[i]) : std::uint16_t{0};
        dst[i / 8 * 8 + kPairSlots.slot[i % 8]] = v;
        sums[i / out.group] += bf16_to_f32(v);
      }
    }
    return;
  }
  const FieldScales scales(out.bits);
  const std::int64_t fields = woq_fields_per_row(out.bits);
  for (std::int64_t r = first; r < first + count; ++r) {
    const float* src = x + r * ldx;
    float* dst = out.x.data() + r * (out.row_stride / 4);
    float* sums = out.group_sums.data() + r * out.groups();
    for (std::int64_t j = 0; j < out.groups(); ++j) {
      const std::int64_t begin = j * out.group, end = std::min(out.k, begin + out.group);
      float s = 0.f;
      for (std::int64_t i = begin; i < end; ++i) {
        s += src[i];
        dst[i] = src[i] * scales.factor[i % fields];
      }
      sums[j] = s;
    }
    std::memset(dst + out.k, 0, static_cast<std::size_t>(out.k_padded - out.k) * sizeof(float));
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
