#include "ops/quant/float_activations.h"

#include <cstring>

#include "jit/base/error.h"

namespace qforge {

void prepare_float_activations(FloatActivations& out, std::int64_t m, std::int64_t k,
                               std::int64_t k_padded, std::int64_t group) {
  QF_REQUIRE(m > 0 && k > 0 && group > 0 && k_padded >= k && k_padded % group == 0,
             "activations: bad shape M ", m, ", K ", k, ", Kp ", k_padded, ", g ", group);
  if (out.m == m && out.k == k && out.k_padded == k_padded && out.group == group) return;
  const std::int64_t stride = static_cast<std::int64_t>(round_up(k_padded * 4, kCacheLine));
  out.m = m;
  out.k = k;
  out.k_padded = k_padded;
  out.group = group;
  out.row_stride = stride;
  out.x.resize(m * stride / 4);
  out.group_sums.resize(m * (k_padded / group));
  std::memset(out.x.data(), 0, m * stride);  // padding: x = 0
}

void copy_float_activation_rows(const float* x, std::int64_t ldx, std::int64_t first,
                                std::int64_t count, FloatActivations& out) {
  QF_REQUIRE(first >= 0 && count >= 0 && first + count <= out.m, "activations: rows [", first, ", ",
             first + count, ") outside the ", out.m, " prepared");
  for (std::int64_t r = first; r < first + count; ++r) {
    const float* src = x + r * ldx;
    float* dst = out.x.data() + r * (out.row_stride / 4);
    std::memcpy(dst, src, static_cast<std::size_t>(out.k) * sizeof(float));
    float* sums = out.group_sums.data() + r * out.groups();
    for (std::int64_t j = 0; j < out.groups(); ++j) {
      float s = 0.f;
      for (std::int64_t i = j * out.group; i < (j + 1) * out.group; ++i) s += dst[i];
      sums[j] = s;
    }
  }
}

}  // namespace qforge
