#include "ops/ref/gemm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "jit/base/error.h"

namespace qforge {
namespace {

std::int32_t load_i32(const std::uint8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The signed operand of column lane c, element i of a group.
int operand_at(const std::uint8_t* group, int bits, int lane, std::int64_t i) {
  if (bits == 8) return static_cast<std::int8_t>(group[(i / 4) * kRowBytes + lane * 4 + i % 4]);
  const std::uint8_t byte = group[(i / 8) * kRowBytes + lane * 4 + i % 4];
  return (i % 8) < 4 ? (byte & 0xf) : (byte >> 4);
}

void check_shapes(const PackedWeights& w, const QuantizedActivations& x) {
  QF_REQUIRE(x.k == w.k() && x.k_padded == w.header.k_padded && x.group == w.header.group,
             "gemm: activations (K ", x.k, ", Kp ", x.k_padded, ", g ", x.group,
             ") do not match the weights (K ", w.k(), ", Kp ", w.header.k_padded, ", g ",
             w.header.group, ")");
}

// Corrected group sum C for row m, packed panel `panel`, lane c, group j.
std::int32_t corrected_sum(const PackedWeights& w, const QuantizedActivations& x, std::int64_t m,
                           std::int64_t panel, int lane, std::int64_t j) {
  const PackedGeometry& geo = w.geometry;
  const std::int64_t g = w.header.group;
  const std::uint8_t* group = w.panel(panel) + j * geo.group_bytes;
  const std::uint8_t* trailer = group + geo.group_data_bytes;
  // sum of xq * operand, as a VNNI kernel gets it: sum of xu * operand - comp
  std::int32_t acc = 0;
  for (std::int64_t i = 0; i < g; ++i)
    acc += (x.value(m, j * g + i) + 128) * operand_at(group, w.bits(), lane, i);
  const std::int32_t comp = load_i32(trailer + kTrailerComp + 4 * lane);
  const std::int32_t zc = w.asymmetric() ? 0 : symmetric_zero_coef(w.bits());
  return acc - comp + zc * x.sums(m)[j];
}

// y before the epilogue for row m, packed panel, lane.
float dequantized_output(const PackedWeights& w, const QuantizedActivations& x, std::int64_t m,
                         std::int64_t panel, int lane) {
  const PackedGeometry& geo = w.geometry;
  float y = 0.f;
  for (std::int64_t j = 0; j < geo.groups; ++j) {
    const std::uint8_t* trailer = w.panel(panel) + j * geo.group_bytes + geo.group_data_bytes;
    float scale;
    std::memcpy(&scale, trailer + kTrailerScales + 4 * lane, 4);
    y = std::fma(static_cast<float>(corrected_sum(w, x, m, panel, lane, j)), scale, y);
    if (w.asymmetric()) {
      float offset;
      std::memcpy(&offset, trailer + kTrailerOffset + 4 * lane, 4);
      y = std::fma(static_cast<float>(x.sums(m)[j]), offset, y);
    }
  }
  return y * x.scale[m];
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
  QF_REQUIRE(out != nullptr, "gemm: output pointer is null");
  if (e.output == OutputKind::group_sums) {
    group_sums_reference(w, x, static_cast<std::int32_t*>(out));
    return;
  }
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

}  // namespace qforge
