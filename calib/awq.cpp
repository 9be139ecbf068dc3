#include "calib/awq.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <span>

#include "calib/blas_library.h"
#include "calib/gptq.h"
#include "jit/base/error.h"
#include "jit/base/parallel_for.h"

namespace qforge {
namespace {

// The scales of one alpha: base^alpha, 1 where the channel never fired, normalised so
// that max * min = 1.
std::vector<double> scales_for(const std::vector<double>& base, double alpha) {
  std::vector<double> s(base.size(), 1.0);
  double lo = 0, hi = 0;
  bool any = false;
  for (std::size_t c = 0; c < base.size(); ++c) {
    if (base[c] <= 0) continue;
    s[c] = std::pow(base[c], alpha);
    lo = any ? std::min(lo, s[c]) : s[c];
    hi = any ? std::max(hi, s[c]) : s[c];
    any = true;
  }
  if (!any) return s;
  const double norm = std::sqrt(lo * hi);
  for (std::size_t c = 0; c < base.size(); ++c)
    if (base[c] > 0) s[c] /= norm;
  return s;
}

// The group's error under the input's Gram block G (count x count at `gram`, leading
// dimension ld): e G e^T.
GroupParams search_group_params_gram(const float* values, const double* gram, std::int64_t ld,
                                     std::int64_t count, int bits, bool asymmetric) {
  std::vector<double> ge(static_cast<std::size_t>(count));
  return search_clip_candidates(values, count, bits, asymmetric, [&](std::span<const double> e) {
    blas().dsymv(CblasRowMajor, CblasUpper, int(count), 1.0, gram, int(ld), e.data(), 1, 0.0,
                 ge.data(), 1);
    return blas().ddot(int(count), e.data(), 1, ge.data(), 1);
  });
}

// Q(W diag(s)) of the n x k matrix `w`, dequantized: with the clipping search on the
// scaled input's Gram matrix (the quantizer the layer will get), or round-to-nearest.
std::vector<float> quantize_scaled(const float* w, std::int64_t n, const AwqInput& input,
                                   const std::vector<double>& s, const QuantScheme& scheme,
                                   const AwqOptions& options, int threads) {
  const std::size_t ku = s.size();
  std::vector<float> scaled(static_cast<std::size_t>(n) * ku);
  for (std::size_t j = 0; j < scaled.size(); ++j) scaled[j] = static_cast<float>(w[j] * s[j % ku]);
  std::vector<float> back;
  if (options.clip) {
    std::vector<double> energy(ku), gram;
    for (std::size_t c = 0; c < ku; ++c) energy[c] = input.mean_sq[c] / (s[c] * s[c]);
    if (!input.gram.empty()) {
      gram.resize(ku * ku);
      for (std::size_t a = 0; a < ku; ++a)
        for (std::size_t b = 0; b < ku; ++b)
          gram[a * ku + b] = input.gram[a * ku + b] / (s[a] * s[b]);
    }
    back = dequantize(
        quantize_clipped(scaled.data(), n, input.k, scheme, energy.data(), gram, threads));
  } else {
    back = dequantize(quantize_reference(scaled.data(), n, input.k, scheme));
  }
  return back;
}

// sum over rows r of e_r G e_r^T, e = back diag(s)^-1 - w (G's diagonal E[x^2] where there
// is no G).
double gram_error(const std::vector<float>& w, const std::vector<float>& back,
                  const std::vector<double>& s, const AwqInput& input, int threads) {
  const auto ku = static_cast<std::size_t>(input.k);
  const auto m = static_cast<int>(w.size() / ku);
  std::vector<double> e(w.size());
  for (std::size_t j = 0; j < w.size(); ++j) e[j] = back[j] / s[j % ku] - w[j];
  double error = 0;
  if (input.gram.empty()) {
    for (std::size_t j = 0; j < e.size(); ++j) error += e[j] * e[j] * input.mean_sq[j % ku];
    return error;
  }
  std::vector<double> product(e.size());  // sum_r e_r G e_r^T = sum (E G) .* E
  blas().set_num_threads(std::max(1, threads));
  blas().dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, input.k, input.k, 1.0, e.data(),
               input.k, input.gram.data(), input.k, 0.0, product.data(), input.k);
  for (std::size_t j = 0; j < e.size(); ++j) error += product[j] * e[j];
  return error;
}

void require_served(const QuantScheme& scheme) {
  QF_REQUIRE(scheme.granularity != Granularity::per_tensor, "--awq with ", to_string(scheme),
             ": AWQ needs per-channel or per-group scales (one scale per tensor is not served)");
}

}  // namespace

AwqScales search_awq_scales(const std::vector<const float*>& weights,
                            const std::vector<std::int64_t>& rows, const AwqInput& input,
                            const QuantScheme& scheme, const AwqOptions& options, int tie,
                            int tie_period, int threads, const AwqOutputError& output_error) {
  require_served(scheme);
  const int k = input.k;
  const auto ku = static_cast<std::size_t>(k);
  QF_REQUIRE(input.mean_abs.size() == ku && input.mean_sq.size() == ku &&
                 (input.gram.empty() || input.gram.size() == ku * ku),
             "AWQ: ", input.name, ": statistics of another width than ", k);
  QF_REQUIRE(options.grid >= 1, "--awq grid ", options.grid, ": at least 1");
  QF_REQUIRE(tie >= 1 && tie_period >= 1 && k % (tie * tie_period) == 0, "AWQ: ", input.name,
             ": cannot tie ", tie, " groups of ", tie_period, " channels of ", k);
  // The rows the error is measured on, spread evenly over all matrices.
  std::int64_t total = 0;
  for (std::int64_t r : rows) total += r;
  const std::int64_t m = std::min<std::int64_t>(total, std::max(1, options.search_rows));
  std::vector<float> sample(static_cast<std::size_t>(m) * ku);
  for (std::int64_t i = 0; i < m; ++i) {
    std::int64_t r = i * total / m;
    std::size_t t = 0;
    while (r >= rows[t]) r -= rows[t++];
    std::copy(weights[t] + r * k, weights[t] + (r + 1) * k, sample.begin() + i * k);
  }
  // The activation magnitudes, tied where the channels must share a scale.
  std::vector<double> base(input.mean_abs.begin(), input.mean_abs.end());
  if (tie > 1) {
    const int block = tie * tie_period;
    for (int b = 0; b < k; b += block)
      for (int d = 0; d < tie_period; ++d) {
        double sum = 0;
        for (int h = 0; h < tie; ++h) sum += base[std::size_t(b + h * tie_period + d)];
        for (int h = 0; h < tie; ++h) base[std::size_t(b + h * tie_period + d)] = sum / tie;
      }
  }
  AwqScales best;
  for (int i = 0; i < options.grid; ++i) {
    const double alpha = static_cast<double>(i) / options.grid;
    std::vector<double> s = scales_for(base, alpha);
    double error = 0;
    if (output_error) {
      std::vector<std::vector<float>> back;
      for (std::size_t t = 0; t < weights.size(); ++t) {
        back.push_back(quantize_scaled(weights[t], rows[t], input, s, scheme, options, threads));
        for (std::size_t j = 0; j < back.back().size(); ++j)
          back.back()[j] = static_cast<float>(back.back()[j] / s[j % ku]);
      }
      error = output_error(back);
    } else {
      const std::vector<float> back =
          quantize_scaled(sample.data(), m, input, s, scheme, options, threads);
      error = gram_error(sample, back, s, input, threads) / static_cast<double>(m);
    }
    if (i == 0) best.rtn_error = error;
    if (i == 0 || error < best.error) {
      best.alpha = alpha;
      best.s = std::move(s);
      best.error = error;
    }
  }
  return best;
}

QuantizedTensor quantize_clipped(const float* weights, std::int64_t n, std::int64_t k,
                                 const QuantScheme& scheme, const double* energy,
                                 std::span<const double> gram, int threads) {
  require_served(scheme);
  require_finite(weights, n * k, "AWQ weights");
  QuantizedTensor t = zero_quantized_tensor(n, k, scheme);
  const std::int64_t groups = t.groups(), g = t.group;
  blas().set_num_threads(1);  // rows split over our threads
  parallel_for(n, threads, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t j = 0; j < groups; ++j) {
        const std::int64_t first = j * g, count = std::min(g, k - first);
        const float* values = weights + r * k + first;
        const GroupParams p =
            gram.empty()
                ? search_group_params(values, energy + first, count, scheme.bits, scheme.asymmetric)
                : search_group_params_gram(values, gram.data() + first * k + first, k, count,
                                           scheme.bits, scheme.asymmetric);
        t.scales[std::size_t(r * groups + j)] = p.scale;
        t.zero_points[std::size_t(r * groups + j)] = p.zero_point;
        for (std::int64_t i = 0; i < g; ++i)
          t.q[std::size_t(r * t.k_padded + first + i)] = static_cast<std::int16_t>(
              quantize_value(i < count ? values[i] : 0.f, p, scheme.bits, scheme.asymmetric));
      }
  });
  return t;
}

}  // namespace qforge
