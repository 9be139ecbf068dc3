#include "calib/gptq.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "calib/blas_library.h"
#include "calib/gptq_group_loss.h"
#include "jit/base/error.h"
#include "jit/base/parallel_for.h"

namespace qforge {
namespace {

// In place: the upper Cholesky factor of the column-major symmetric matrix `a`
// (a = S^T S); LAPACK reads and writes the upper triangle only.
int lapack_cholesky_upper(std::vector<double>& a, int k) {
  int info = 0;
  blas().dpotrf("U", &k, a.data(), &k, &info, 1);
  return info;
}

// In place: the inverse of the lower triangle of the column-major `a`.
int lapack_invert_lower(std::vector<double>& a, int k) {
  int info = 0;
  blas().dtrtri("L", "N", &k, a.data(), &k, &info, 1, 1);
  return info;
}

// Rows per task: each runs every block on its rows, with its own matrix products.
constexpr std::int64_t kRowChunk = 64;

// The block size that keeps every group's first column either at a block's start or with
// the whole group inside one block, so that group parameters see the weights as updated
// by every earlier column (what the column-at-a-time algorithm sees).
int block_for_groups(int block, std::int64_t group, std::int64_t k_padded, bool static_groups) {
  if (static_groups || group >= k_padded) return block;
  if (group <= block) return static_cast<int>(block / group * group);
  for (int b = block; b > 1; --b)
    if (group % b == 0) return b;
  return 1;
}

double dequantized(int q, const GroupParams& p, bool asymmetric) {
  const int v = asymmetric ? q - p.zero_point : q;
  return static_cast<double>(p.scale) * v;
}

}  // namespace

std::vector<GroupParams> clip_candidates(float lo, float hi, int bits, bool asymmetric) {
  std::vector<GroupParams> candidates;
  if (!extra_negative_level(bits, asymmetric)) {
    for (int g = 0; g < kClipGrid; ++g) {
      const auto p = static_cast<float>(clip_factor(g));
      candidates.push_back(group_params_from_range(lo * p, hi * p, bits, asymmetric));
    }
    return candidates;
  }
  candidates.push_back(group_params_from_range(lo, hi, bits, false));
  const float unclipped = std::max(-lo, hi) / static_cast<float>(stored_max(bits, false));
  for (int g = 0; g < kClipGrid; ++g) {
    GroupParams params;
    params.scale = round_scale_to_f16(unclipped * static_cast<float>(clip_factor(g)));
    candidates.push_back(params);
    params.scale = -params.scale;
    candidates.push_back(params);
  }
  return candidates;
}

GroupParams search_clip_candidates(const float* values, std::int64_t count, int bits,
                                   bool asymmetric,
                                   const std::function<double(std::span<const double>)>& score) {
  float lo = 0.f, hi = 0.f;
  for (std::int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  std::vector<double> e(static_cast<std::size_t>(count));
  GroupParams best;
  double best_error = 0;
  bool first = true;
  for (const GroupParams& params : clip_candidates(lo, hi, bits, asymmetric)) {
    for (std::int64_t i = 0; i < count; ++i)
      e[std::size_t(i)] =
          dequantized(quantize_value(values[i], params, bits, asymmetric), params, asymmetric) -
          values[i];
    const double error = score(e);
    if (first || error < best_error) {
      best = params;
      best_error = error;
      first = false;
    }
  }
  return best;
}

GroupParams search_group_params(const float* values, const double* weights, std::int64_t count,
                                int bits, bool asymmetric) {
  return search_clip_candidates(values, count, bits, asymmetric, [&](std::span<const double> e) {
    double error = 0;
    for (std::size_t i = 0; i < e.size(); ++i)
      error += (weights != nullptr ? weights[i] : 1.0) * e[i] * e[i];
    return error;
  });
}

GptqHessian::GptqHessian(std::span<const double> gram, int k, const GptqOptions& options,
                         const std::string& site, int threads)
    : k_(k), options_(options), order_(static_cast<std::size_t>(k)), dead_(std::size_t(k), 0) {
  QF_REQUIRE(k > 0 && gram.size() == std::size_t(k) * std::size_t(k), "GPTQ: ", site,
             ": a Gram matrix of ", gram.size(), " values for ", k, " input channels");
  QF_REQUIRE(options.damp >= 0 && options.damp < 1, "--gptq-damp ", options.damp,
             ": expected a fraction in [0, 1)");
  QF_REQUIRE(options.block >= 1, "GPTQ block ", options.block, ": at least 1");
  const auto ku = static_cast<std::size_t>(k);
  std::vector<double> diag(ku);
  for (std::size_t j = 0; j < ku; ++j) {
    diag[j] = gram[j * ku + j];
    QF_REQUIRE(std::isfinite(diag[j]) && diag[j] >= 0, "GPTQ: ", site, ": Gram diagonal ", j,
               " is ", diag[j]);
    if (diag[j] == 0) {
      dead_[j] = 1;
      diag[j] = 1;
    }
  }
  const double damp = options.damp * std::accumulate(diag.begin(), diag.end(), 0.0) / k;
  diagonal_.resize(ku);
  for (std::size_t j = 0; j < ku; ++j) diagonal_[j] = diag[j] + damp;
  std::iota(order_.begin(), order_.end(), 0);
  if (options.act_order)
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return diag[std::size_t(a)] > diag[std::size_t(b)]; });
  // H in processing order (symmetric, so its row- and column-major forms agree).
  factor_.resize(ku * ku);
  for (std::size_t i = 0; i < ku; ++i) {
    const auto oi = static_cast<std::size_t>(order_[i]);
    for (std::size_t j = 0; j < ku; ++j) {
      const auto oj = static_cast<std::size_t>(order_[j]);
      factor_[i * ku + j] =
          dead_[oi] || dead_[oj] ? 0.0 : gram[oi * ku + oj];  // dead channels are cut off
    }
    factor_[i * ku + i] = diag[oi] + damp;
  }
  // U without forming H^-1 (half the arithmetic of factor, invert, factor again). With J
  // the order reversal, J H J = S^T S (S upper) gives H = V V^T for the upper V = J S^T J,
  // so H^-1 = V^-T V^-1 and U = V^-1, that is U^T = (J S J)^-1, lower. Column-major, J M J
  // is the flat array reversed; the column-major lower U^T read row-major is U.
  blas().set_num_threads(std::max(1, threads));
  std::reverse(factor_.begin(), factor_.end());  // J H J (symmetric: either major)
  const char* advice = " (raise --gptq-damp, or calibrate on more tokens)";
  int info = lapack_cholesky_upper(factor_, k);
  QF_REQUIRE(info == 0, "GPTQ: ", site,
             ": the damped Hessian is not positive definite (the block of its last ", info,
             " columns)", advice);
  std::reverse(factor_.begin(), factor_.end());  // J S J, lower (the rest: H's entries)
  info = lapack_invert_lower(factor_, k);
  QF_REQUIRE(info == 0, "GPTQ: ", site, ": the Hessian is singular (", info, ")", advice);
  // Clear what LAPACK left below the diagonal (row-major) so rows hold U alone.
  for (std::size_t i = 0; i < ku; ++i)
    std::fill(factor_.begin() + static_cast<std::ptrdiff_t>(i * ku),
              factor_.begin() + static_cast<std::ptrdiff_t>(i * ku + i), 0.0);
}

namespace {

// The clipping grid's parameters for the group of a row whose columns are `first` ..
// `first + count` in processing order, scored by the loss GPTQ itself accrues on the
// group (calib/gptq_group_loss.h): its columns quantized in order, each column's error
// pushed into the group's later columns; first on ties, so the full range unless
// shrinking helps. Later groups see the same pushes whichever parameters win, so the
// group's own loss decides.
GroupParams search_group_params_gptq(const float* values, const GptqHessian& hessian,
                                     std::int64_t first, std::int64_t count, int bits,
                                     bool asymmetric, std::vector<double>& scratch) {
  float lo = 0.f, hi = 0.f;
  for (std::int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  const std::vector<GroupParams> params = clip_candidates(lo, hi, bits, asymmetric);
  const int ranges = static_cast<int>(params.size());
  std::vector<double> loss(params.size());
  for (int r = 0; r < ranges; r += kClipLanes)  // kClipLanes ranges side by side
    gptq_group_losses(values, count, hessian.factor_row(int(first)) + first, hessian.k(),
                      params.data() + r, std::min(kClipLanes, ranges - r), bits, asymmetric,
                      loss.data() + r, scratch);
  int best = 0;
  for (int r = 1; r < ranges; ++r)
    if (loss[std::size_t(r)] < loss[std::size_t(best)]) best = r;
  return params[std::size_t(best)];
}

}  // namespace

QuantizedTensor gptq_quantize(const float* weights, std::int64_t n, std::int64_t k,
                              const QuantScheme& scheme, const GptqHessian& hessian, int threads) {
  QF_REQUIRE(hessian.k() == k, "GPTQ: a Hessian of ", hessian.k(), " channels for weights of ", k,
             " columns");
  QF_REQUIRE(scheme.granularity != Granularity::per_tensor, "--gptq with ", to_string(scheme),
             ": GPTQ needs per-channel or per-group scales (one scale per tensor is not served)");
  require_finite(weights, n * k, "GPTQ weights");
  QuantizedTensor t = zero_quantized_tensor(n, k, scheme);
  const std::int64_t groups = t.groups();

  const GptqOptions& options = hessian.options();
  const bool static_groups = options.act_order;
  const int block = block_for_groups(options.block, t.group, t.k_padded, static_groups);
  const std::vector<int>& order = hessian.order();
  const int bits = scheme.bits;
  const bool asym = scheme.asymmetric;
  const std::int64_t g = t.group;

  blas().set_num_threads(1);  // the rows split over our threads instead
  const std::int64_t chunks = (n + kRowChunk - 1) / kRowChunk;
  parallel_for(chunks, threads, [&](std::int64_t c0, std::int64_t c1) {
    std::vector<double> w(static_cast<std::size_t>(kRowChunk * k));  // rows, processing order
    std::vector<double> errors(static_cast<std::size_t>(kRowChunk * block));
    std::vector<float> group_values(static_cast<std::size_t>(g));
    std::vector<double> search_scratch;  // search_group_params_gptq's group copy
    std::vector<GroupParams> params(static_cast<std::size_t>(kRowChunk * groups));
    for (std::int64_t chunk = c0; chunk < c1; ++chunk) {
      const std::int64_t r0 = chunk * kRowChunk, rows = std::min(kRowChunk, n - r0);
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t i = 0; i < k; ++i) {
          const int c = order[static_cast<std::size_t>(i)];
          w[std::size_t(r * k + i)] = hessian.dead(c) ? 0.0 : weights[(r0 + r) * k + c];
        }
      // Group parameters of the values of row r, group j, read in natural column order.
      auto choose = [&](std::int64_t r, std::int64_t j, auto&& value_of) {
        const std::int64_t first = j * g, count = std::min(g, k - first);
        for (std::int64_t i = 0; i < count; ++i)
          group_values[std::size_t(i)] = static_cast<float>(value_of(first + i));
        if (options.clip_search && !static_groups) {  // natural order: first is the column i
          params[std::size_t(r * groups + j)] = search_group_params_gptq(
              group_values.data(), hessian, first, count, bits, asym, search_scratch);
          return;
        }
        params[std::size_t(r * groups + j)] =
            options.clip_search ? search_group_params(group_values.data(),
                                                      hessian.diagonal() + first, count, bits, asym)
                                : choose_group_params(group_values.data(), count, bits, asym);
      };
      if (static_groups)  // act-order: every group's parameters from the weights as given
        for (std::int64_t r = 0; r < rows; ++r)
          for (std::int64_t j = 0; j < groups; ++j)
            choose(r, j, [&](std::int64_t c) {
              return hessian.dead(int(c)) ? 0.f : weights[(r0 + r) * k + c];
            });
      for (std::int64_t i1 = 0; i1 < k; i1 += block) {
        const std::int64_t i2 = std::min<std::int64_t>(i1 + block, k), width = i2 - i1;
        for (std::int64_t r = 0; r < rows; ++r) {
          double* wr = w.data() + r * k;
          for (std::int64_t i = i1; i < i2; ++i) {
            const int c = order[std::size_t(i)];
            const std::int64_t j = c / g;
            // Natural order: column i is column c, so the group's columns are wr[c ..].
            if (!static_groups && c % g == 0) choose(r, j, [&](std::int64_t cc) { return wr[cc]; });
            const GroupParams& p = params[std::size_t(r * groups + j)];
            const int q = quantize_value(static_cast<float>(wr[i]), p, bits, asym);
            t.q[std::size_t((r0 + r) * t.k_padded + c)] = static_cast<std::int16_t>(q);
            const double* u = hessian.factor_row(int(i));
            const double e = (wr[i] - dequantized(q, p, asym)) / u[i];
            for (std::int64_t jj = i + 1; jj < i2; ++jj) wr[jj] -= e * u[jj];
            errors[std::size_t(r * width + (i - i1))] = e;
          }
        }
        if (i2 < k)  // w[:, i2:] -= E (rows x width) U[i1:i2, i2:]
          blas().dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(rows), int(k - i2),
                       int(width), -1.0, errors.data(), int(width),
                       hessian.factor_row(int(i1)) + i2, int(k), 1.0, w.data() + i2, int(k));
      }
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < groups; ++j) {
          const GroupParams& p = params[std::size_t(r * groups + j)];
          t.scales[std::size_t((r0 + r) * groups + j)] = p.scale;
          t.zero_points[std::size_t((r0 + r) * groups + j)] = p.zero_point;
          for (std::int64_t c = std::max(k, j * g); c < (j + 1) * g; ++c)  // padding: zeros
            t.q[std::size_t((r0 + r) * t.k_padded + c)] =
                static_cast<std::int16_t>(quantize_value(0.f, p, bits, asym));
        }
    }
  });
  return t;
}

double output_error(const float* weights, const QuantizedTensor& quantized,
                    std::span<const double> gram) {
  const std::int64_t n = quantized.n, k = quantized.k;
  QF_REQUIRE(gram.size() == std::size_t(k * k), "output_error: Gram of ", gram.size(),
             " values for k = ", k);
  const std::vector<float> deq = dequantize(quantized);
  std::vector<double> e(static_cast<std::size_t>(k));
  double total = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c)
      e[std::size_t(c)] = double(deq[std::size_t(r * k + c)]) - weights[r * k + c];
    for (std::int64_t a = 0; a < k; ++a) {
      double row = 0;
      for (std::int64_t b = 0; b < k; ++b) row += gram[std::size_t(a * k + b)] * e[std::size_t(b)];
      total += e[std::size_t(a)] * row;
    }
  }
  return total;
}

}  // namespace qforge
