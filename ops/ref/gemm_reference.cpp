#include "ops/ref/gemm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "jit/base/error.h"

namespace qforge {
namespace {

void check_shapes(const PackedWeights& w, const QuantizedActivations& x) {
  QF_REQUIRE(x.k == w.k() && x.k_padded == w.header.k_padded && x.group == w.header.group,
             "gemm: activations (K ", x.k, ", Kp ", x.k_padded, ", g ", x.group,
             ") do not match the weights (K ", w.k(), ", Kp ", w.header.k_padded, ", g ",
             w.header.group, ")");
}

// Group sum C = sum_k xq * v for row m, packed panel `panel`, lane c, group j, where
// v = operand - bias is the signed value the operand stands for (packed_layout.h).
std::int32_t corrected_sum(const PackedWeights& w, const QuantizedActivations& x, std::int64_t m,
                           std::int64_t panel, int lane, std::int64_t j) {
  const std::int64_t g = w.header.group;
  const std::uint8_t* group = packed_group(w.panel(panel), w.geometry, j);
  const int bias = operand_bias(w.bits(), w.asymmetric());
  std::int32_t sum = 0;
  for (std::int64_t i = 0; i < g; ++i)
    sum += x.value(m, j * g + i) * (packed_operand(group, w.bits(), lane, i) - bias);
  return sum;
}

// y before the epilogue for row m, packed panel, lane.
float dequantized_output(const PackedWeights& w, const QuantizedActivations& x, std::int64_t m,
                         std::int64_t panel, int lane) {
  const PackedGeometry& geo = w.geometry;
  float y = 0.f;
  for (std::int64_t j = 0; j < geo.groups; ++j) {
    const float scale = packed_scale(w.panel(panel), geo, j, lane);
    y = std::fma(static_cast<float>(corrected_sum(w, x, m, panel, lane, j)), scale, y);
    if (w.asymmetric())
      y = std::fma(static_cast<float>(x.sums(m)[j]), packed_offset(w.panel(panel), geo, j, lane),
                   y);
  }
  return y * x.scale[m];
}

void check_shapes(const PackedWeights& w, const FloatActivations& x) {
  QF_REQUIRE(x.k == w.k() && x.k_padded == w.header.k_padded && x.group == w.header.group &&
                 x.bits == w.bits(),
             "gemm: activations (K ", x.k, ", Kp ", x.k_padded, ", g ", x.group,
             ") do not match the weights (K ", w.k(), ", Kp ", w.header.k_padded, ", g ",
             w.header.group, ")");
}

// Weight-only: y before the epilogue, in double, rounded once to float.
float dequantized_output(const PackedWeights& w, const FloatActivations& x, std::int64_t m,
                         std::int64_t panel, int lane) {
  const PackedGeometry& geo = w.geometry;
  const std::int64_t g = w.header.group;
  const int bias = operand_bias(w.bits(), w.asymmetric());
  double y = 0;
  for (std::int64_t j = 0; j < geo.groups; ++j) {
    const std::uint8_t* group = packed_group(w.panel(panel), geo, j);
    double c = 0;
    for (std::int64_t i = 0; i < g; ++i)
      c += double(x.value(m, j * g + i)) * (packed_operand(group, w.bits(), lane, i) - bias);
    y += c * packed_scale(w.panel(panel), geo, j, lane);
    if (w.asymmetric()) y += double(x.sums(m)[j]) * packed_offset(w.panel(panel), geo, j, lane);
  }
  return static_cast<float>(y);
}

// The epilogue over every output of a call, y(m, panel, lane) before it.
template <typename Activations>
void reference_call(const PackedWeights& w, const Activations& x, const Epilogue& e,
                    const EpilogueArgs& args, void* out, std::int64_t ldc) {
  check_shapes(w, x);
  QF_REQUIRE(out != nullptr, "gemm: output pointer is null");
  const bool pair = w.header.interleaved_pair != 0;
  QF_REQUIRE(pair == e.swiglu, "gemm: the swiglu epilogue needs interleaved gate/up weights");
  QF_REQUIRE(!(e.bias && e.swiglu), "gemm: bias and swiglu do not combine");
  QF_REQUIRE(!e.bias || args.bias, "gemm: bias epilogue without a bias pointer");
  QF_REQUIRE(!e.residual || args.residual, "gemm: residual epilogue without a residual pointer");
  QF_REQUIRE(ldc >= w.n(), "gemm: ldc ", ldc, " < N ", w.n());
  for (std::int64_t m = 0; m < x.m; ++m)
    for (std::int64_t col = 0; col < w.n(); ++col) {
      const std::int64_t p = col / kPanelWidth;
      const int lane = static_cast<int>(col % kPanelWidth);
      float y = dequantized_output(w, x, m, pair ? 2 * p : p, lane);
      if (e.bias) y += args.bias[col];
      if (e.swiglu) y = silu_reference(y) * dequantized_output(w, x, m, 2 * p + 1, lane);
      if (e.residual) y += args.residual[m * args.ld_residual + col];
      if (e.output == OutputKind::f32)
        static_cast<float*>(out)[m * ldc + col] = y;
      else
        static_cast<std::uint8_t*>(out)[m * ldc + col] =
            requantize_reference(y, args.out_scale, args.out_zero_point);
    }
}

}  // namespace

float silu_reference(float v) {
  return v / (1.f + std::exp(-v));
}

std::uint8_t requantize_reference(float y, float out_scale, std::int32_t zero_point) {
  const float q = std::round(y / out_scale) + static_cast<float>(zero_point);
  return static_cast<std::uint8_t>(std::clamp(q, 0.f, 255.f));
}

void group_sums_reference(const PackedWeights& w, const QuantizedActivations& x,
                          std::int32_t* out) {
  check_shapes(w, x);
  const std::int64_t n = w.n(), groups = w.geometry.groups;
  const int halves = w.header.interleaved_pair ? 2 : 1;
  const std::int64_t columns = n * halves;
  for (std::int64_t m = 0; m < x.m; ++m)
    for (int half = 0; half < halves; ++half)
      for (std::int64_t col = 0; col < n; ++col) {
        const std::int64_t panel = (col / kPanelWidth) * halves + half;
        const int lane = static_cast<int>(col % kPanelWidth);
        for (std::int64_t j = 0; j < groups; ++j)
          out[(m * columns + half * n + col) * groups + j] = corrected_sum(w, x, m, panel, lane, j);
      }
}

void gemm_reference(const PackedWeights& w, const QuantizedActivations& x, const Epilogue& e,
                    const EpilogueArgs& args, void* out, std::int64_t ldc) {
  check_shapes(w, x);
  if (e.output == OutputKind::group_sums) {
    QF_REQUIRE(out != nullptr, "gemm: output pointer is null");
    group_sums_reference(w, x, static_cast<std::int32_t*>(out));
    return;
  }
  reference_call(w, x, e, args, out, ldc);
}

void gemm_reference(const PackedWeights& w, const FloatActivations& x, const Epilogue& e,
                    const EpilogueArgs& args, void* out, std::int64_t ldc) {
  QF_REQUIRE(e.output != OutputKind::group_sums,
             "gemm: weight-only calls have no integer group sums");
  reference_call(w, x, e, args, out, ldc);
}

}  // namespace qforge
