#include "tests/support/kernel_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>

#include "jit/core/code_cache.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/split_activations.h"
#include "ops/ref/gemm_reference.h"
#include "tests/support/random_data.h"

namespace qforge::test {

std::string describe(const KernelCase& c) {
  std::ostringstream s;
  s << isa_name(c.isa) << " M " << c.m << " N " << c.n << " K " << c.k << " " << to_string(c.scheme)
    << " " << epilogue_name(c.epilogue) << " seed " << c.seed << " splits " << c.unit_splits;
  if (!c.default_blocking) s << " blocking " << c.blocking.mr << "x" << c.blocking.nr;
  if (c.float_offsets) s << " float offsets";
  if (c.scheme.weight_only) s << (c.bf16 ? " (bf16 activations)" : " (f32 activations)");
  if (c.split_digits) s << " split into " << c.split_digits << " digit rows";
  return s.str();
}

GemmKey key_for(const KernelCase& c, const PackedHeader& h) {
  const ActivationKind activation = !c.scheme.weight_only ? ActivationKind::s8
                                    : c.split_digits == 2 ? ActivationKind::s8x2
                                    : c.split_digits == 3 ? ActivationKind::s8x3
                                    : c.bf16              ? ActivationKind::bf16
                                                          : ActivationKind::f32;
  GemmKey key = gemm_key_for(h, c.epilogue, c.isa, c.m, activation);
  if (c.woq_chains >= 0) {
    key.woq_chains = c.woq_chains == 1;
    if (c.default_blocking) key.blocking = default_blocking(key);
  }
  if (!c.default_blocking) key.blocking = c.blocking;
  return key;
}

namespace {

constexpr std::uint8_t kPoison = 0xA5;
constexpr int kGuardBytes = 256;

// sum over column `lane` of `panel`'s groups j of sum_i abs_x(j g + i) * (|operand| + bias)
// * |scale| + abs_xsum(j) * |offset|: an upper bound of sum_k |x[k]| |w[k]| for weights
// w = scale * (operand - bias) + offset.
template <typename AbsX, typename AbsXsum>
double column_magnitude(const PackedWeights& w, std::int64_t panel, int lane, const AbsX& abs_x,
                        const AbsXsum& abs_xsum) {
  const PackedGeometry& geo = w.geometry;
  const std::int64_t g = w.header.group;
  const int bias = operand_bias(w.bits(), w.asymmetric());
  double magnitude = 0;
  for (std::int64_t j = 0; j < geo.groups; ++j) {
    const std::uint8_t* group = packed_group(w.panel(panel), geo, j);
    double sum = 0;
    for (std::int64_t i = 0; i < g; ++i)
      sum += abs_x(j * g + i) * (packed_operand(group, w.bits(), lane, i) + bias);
    magnitude += sum * std::fabs(packed_scale(w.panel(panel), geo, j, lane));
    if (w.asymmetric())
      magnitude += abs_xsum(j) * std::fabs(packed_offset(w.panel(panel), geo, j, lane));
  }
  return magnitude;
}

// What a weight-only kernel's float sums can be off by for output column `col` of row m
// (within its half `panel`): each group's acc = sum x * operand is a float sum of g
// products, so its error is a few ulps of K times the largest partial sums; a generous
// bound is K * 2^-22 times sum |x| * (|operand| + bias) * |scale| + |xsum| * |offset|.
double weight_only_tolerance(const PackedWeights& w, const FloatActivations& x, std::int64_t m,
                             std::int64_t panel, int lane) {
  const double magnitude = column_magnitude(
      w, panel, lane, [&](std::int64_t k) { return std::fabs(double(x.value(m, k))); },
      [&](std::int64_t j) { return std::fabs(double(x.sums(m)[j])); });
  return double(w.k()) * std::ldexp(1.0, -22) * magnitude;
}

// sum_k |dequantized w[k]| of column `lane` of `panel`, bounded above (|x| = 1).
double column_magnitude(const PackedWeights& w, std::int64_t panel, int lane) {
  const double g = double(w.header.group);
  return column_magnitude(
      w, panel, lane, [](std::int64_t) { return 1.0; }, [g](std::int64_t) { return g; });
}

// How far the D digit rows of a row leave it from x, over max |x| of the row: the last
// residual (split_activations.h) and one f32 rounding of each residual computed before it.
double split_residual_fraction(int digits) {
  return 1.0 / (2.0 * 127.0 * std::pow(254.0, digits - 1)) + std::ldexp(1.0, -23);
}

}  // namespace

std::string check_kernel(const KernelCase& c) {
  const std::int64_t m = c.m, n = c.n, k = c.k;
  const bool pair = c.epilogue.swiglu;
  const auto x = random_floats(m * k, c.seed + 1, 1.f);
  const auto pack = [&]() {
    if (c.float_offsets) {
      const QuantizedTensor w = random_quantized(n, k, c.scheme, c.seed, true);
      return pair ? pack_quantized_pair(w, random_quantized(n, k, c.scheme, c.seed + 7, true), 1)
                  : pack_quantized(w, 1);
    }
    const auto w = random_floats(n * k, c.seed, 0.05f);
    const auto w_up = random_floats(n * k, c.seed + 7, 0.05f);
    return pair ? pack_swiglu_pair(w.data(), w_up.data(), n, k, c.scheme, 1)
                : pack_weights(w.data(), n, k, c.scheme, 1);
  };
  const PackedWeights packed = pack();
  const GemmKey key = key_for(c, packed.header);
  const bool weight_only = c.scheme.weight_only;
  QuantizedActivations xq;
  FloatActivations xf;
  const int digits = c.split_digits;
  if (weight_only) {
    prepare_float_activations(xf, m, k, packed.header.k_padded, packed.header.group,
                              packed.header.bits, c.bf16);
    copy_float_activation_rows(x.data(), k, 0, m, xf);
    if (digits) {
      prepare_split_activations(xq, digits, m, k, packed.header.k_padded, packed.header.group);
      split_activation_rows(x.data(), k, digits, 0, m, xq);
    }
  } else {
    prepare_activations(xq, m, k, packed.header.k_padded, packed.header.group);
    quantize_activations(x.data(), k, xq);
  }

  const std::shared_ptr<const GemmGenerator> generator = generate_kernel(key);

  const std::int64_t ldc = n + 3;  // a stride wider than N: columns N..ldc must stay untouched
  const auto bias = random_floats(n, c.seed + 2, 1.f);
  const auto residual = random_floats(m * (n + 5), c.seed + 3, 1.f);
  EpilogueArgs args;
  args.bias = bias.data();
  args.residual = residual.data();
  args.ld_residual = n + 5;
  args.out_scale = 0.02f;
  args.out_zero_point = 120;

  const std::int64_t groups = packed.geometry.groups;
  const bool sums = c.epilogue.output == OutputKind::group_sums;
  const std::int64_t element = c.epilogue.output == OutputKind::u8 ? 1 : 4;
  const std::int64_t out_bytes = sums ? m * groups * packed.header.n_padded * 4 : m * ldc * element;
  std::vector<std::uint8_t> got(out_bytes + kGuardBytes, kPoison), want(out_bytes, kPoison);
  if (!sums) {
    if (weight_only)
      gemm_reference(packed, xf, c.epilogue, args, want.data(), ldc);
    else
      gemm_reference(packed, xq, c.epilogue, args, want.data(), ldc);
  }

  GemmCallArgs call;
  if (weight_only && !digits) {
    set_call_operand(call, xf);
  } else {
    call.a = xq.xq.data();
    call.a_scale = xq.scale.data();
    call.a_sums = xq.group_sums.data();
  }
  call.b = packed.data.data();
  call.c = got.data();
  call.bias = bias.data();
  call.residual = residual.data();
  call.c_stride = ldc;
  call.residual_stride = n + 5;
  call.m = digits ? m * digits : m;
  call.out_scale = args.out_scale;
  call.out_zero_point = static_cast<float>(args.out_zero_point);
  const std::int64_t units = key.units();
  for (int s = 0; s < c.unit_splits; ++s) {
    call.unit_begin = units * s / c.unit_splits;
    call.unit_end = units * (s + 1) / c.unit_splits;
    generator->kernel()(&call);
  }

  std::ostringstream error;
  for (int i = 0; i < kGuardBytes; ++i)
    if (got[out_bytes + i] != kPoison)
      return "wrote past the end of the output (guard byte " + std::to_string(i) + ")";
  if (sums) {
    const int halves = pair ? 2 : 1;
    std::vector<std::int32_t> ref(m * n * halves * groups);
    group_sums_reference(packed, xq, ref.data());
    for (std::int64_t r = 0; r < m; ++r)
      for (int half = 0; half < halves; ++half)
        for (std::int64_t col = 0; col < n; ++col)
          for (std::int64_t j = 0; j < groups; ++j) {
            const std::int64_t packed_col = (col / 16 * halves + half) * 16 + col % 16;
            std::int32_t value;
            std::memcpy(&value,
                        got.data() + ((r * groups + j) * packed.header.n_padded + packed_col) * 4,
                        4);
            const std::int32_t expected = ref[(r * n * halves + half * n + col) * groups + j];
            if (value != expected) {
              error << "group sum m " << r << " col " << col << " half " << half << " group " << j
                    << ": got " << value << " want " << expected;
              return error.str();
            }
          }
    return "";
  }
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t col = 0; col < ldc; ++col) {
      const std::int64_t at = (r * ldc + col) * element;
      if (col >= n) {
        for (int b = 0; b < element; ++b)
          if (got[at + b] != kPoison) {
            error << "wrote column " << col << " >= N in row " << r;
            return error.str();
          }
        continue;
      }
      if (element == 1) {
        // u8 is exact, except after SwiGLU whose exp may differ from std::exp in the
        // last bits and so move a value across a rounding boundary (and weight-only sums,
        // float where the integer kernels' are exact).
        const int diff = std::abs(int(got[at]) - int(want[at]));
        if (diff > (c.epilogue.swiglu || weight_only ? 1 : 0)) {
          error << "u8 m " << r << " col " << col << ": got " << int(got[at]) << " want "
                << int(want[at]);
          return error.str();
        }
        continue;
      }
      float g, e;
      std::memcpy(&g, got.data() + at, 4);
      std::memcpy(&e, want.data() + at, 4);
      float tolerance = 1e-6f * std::fabs(e) + 1e-30f;
      if (weight_only) {
        // The float sums' bound, through SwiGLU's product when there is one.
        const std::int64_t p = col / kPanelWidth;
        const int lane = static_cast<int>(col % kPanelWidth);
        const std::int64_t gate_panel = pair ? 2 * p : p;
        double tg = weight_only_tolerance(packed, xf, r, gate_panel, lane);
        double bound = tg;
        // A split row adds the digits' residual: max |x| * fraction * sum |w|.
        double max_x = 0;
        for (std::int64_t i = 0; i < k; ++i)
          max_x = std::max(max_x, double(std::fabs(x[r * k + i])));
        const double split = digits ? max_x * split_residual_fraction(digits) : 0;
        tg += split * column_magnitude(packed, gate_panel, lane);
        bound = tg;
        if (pair) {
          const double tu = weight_only_tolerance(packed, xf, r, gate_panel + 1, lane) +
                            split * column_magnitude(packed, gate_panel + 1, lane);
          // |d(silu(g) u)| <= 1.1 |u| dg + |silu(g)| du, with |u|, |silu(g)| bounded by
          // max |x| * sum |w| of their columns split
          // (the bound itself / 2^-22 / K unsplit)
          const double scale = double(k) * std::ldexp(1.0, -22);
          const double mg =
              digits ? max_x * column_magnitude(packed, gate_panel, lane) : tg / scale;
          const double mu =
              digits ? max_x * column_magnitude(packed, gate_panel + 1, lane) : tu / scale;
          bound = 1.1 * mu * tg + 1.1 * mg * tu;
        }
        tolerance += static_cast<float>(bound);
      }
      if (!(std::fabs(g - e) <= tolerance)) {
        error << "f32 m " << r << " col " << col << ": got " << g << " want " << e;
        return error.str();
      }
    }
  return "";
}

Epilogue epilogue_number(int i) {
  switch (i % 8) {
    case 0:
      return Epilogue{};
    case 1:
      return Epilogue{true, false, false, OutputKind::f32};
    case 2:
      return Epilogue{false, false, true, OutputKind::f32};
    case 3:
      return Epilogue{false, true, false, OutputKind::f32};
    case 4:
      return Epilogue{false, false, false, OutputKind::u8};
    case 5:
      return Epilogue{false, false, false, OutputKind::group_sums};
    case 6:
      return Epilogue{true, false, true, OutputKind::f32};
    default:
      return Epilogue{false, true, false, OutputKind::u8};
  }
}

}  // namespace qforge::test
