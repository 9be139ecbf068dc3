// GPTQ against a straightforward float64 implementation written here: one column at a
// time, the inverse Hessian updated after each column (the OBQ form, no Cholesky, no lazy
// batches). Both must give the same integers, scales and zero points on random correlated
// inputs, for every scheme, act-order on and off, blocks smaller than a group and larger,
// a dead input channel, and k that is no multiple of the group (padding). A diagonal
// Hessian spreads no error, so GPTQ must then equal round-to-nearest; on correlated inputs
// its output error must be well below round-to-nearest's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "calib/gptq.h"
#include "jit/base/error.h"

namespace qforge {
namespace {

struct Inputs {
  std::vector<float> weights;  // n x k
  std::vector<double> gram;    // k x k
};

// X (m x k) with correlated channels (a few shared factors plus noise) and one channel
// that is always 0 when `dead_channel` >= 0; the Gram is X^T X / m.
Inputs random_inputs(int n, int k, int m, int dead_channel, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Inputs in;
  in.weights.resize(std::size_t(n) * k);
  for (float& w : in.weights) w = normal(rng) * 0.05f;
  constexpr int kFactors = 4;
  std::vector<double> mix(std::size_t(k) * kFactors);
  for (double& v : mix) v = normal(rng);
  std::vector<double> x(std::size_t(m) * k);
  for (int t = 0; t < m; ++t) {
    double f[kFactors];
    for (double& v : f) v = normal(rng);
    for (int c = 0; c < k; ++c) {
      double v = 0.3 * normal(rng) * (1 + c % 3);
      for (int j = 0; j < kFactors; ++j) v += mix[std::size_t(c) * kFactors + j] * f[j];
      x[std::size_t(t) * k + c] = c == dead_channel ? 0.0 : v;
    }
  }
  in.gram.assign(std::size_t(k) * k, 0.0);
  for (int t = 0; t < m; ++t)
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        in.gram[std::size_t(a) * k + b] += x[std::size_t(t) * k + a] * x[std::size_t(t) * k + b];
  for (double& g : in.gram) g /= m;
  return in;
}

// Gauss-Jordan inverse with partial pivoting (float64).
std::vector<double> inverse(std::vector<double> a, int k) {
  std::vector<double> inv(std::size_t(k) * k, 0.0);
  for (int i = 0; i < k; ++i) inv[std::size_t(i) * k + i] = 1;
  for (int col = 0; col < k; ++col) {
    int pivot = col;
    for (int r = col + 1; r < k; ++r)
      if (std::fabs(a[std::size_t(r) * k + col]) > std::fabs(a[std::size_t(pivot) * k + col]))
        pivot = r;
    for (int c = 0; c < k; ++c) {
      std::swap(a[std::size_t(col) * k + c], a[std::size_t(pivot) * k + c]);
      std::swap(inv[std::size_t(col) * k + c], inv[std::size_t(pivot) * k + c]);
    }
    const double d = a[std::size_t(col) * k + col];
    for (int c = 0; c < k; ++c) {
      a[std::size_t(col) * k + c] /= d;
      inv[std::size_t(col) * k + c] /= d;
    }
    for (int r = 0; r < k; ++r) {
      if (r == col) continue;
      const double f = a[std::size_t(r) * k + col];
      for (int c = 0; c < k; ++c) {
        a[std::size_t(r) * k + c] -= f * a[std::size_t(col) * k + c];
        inv[std::size_t(r) * k + c] -= f * inv[std::size_t(col) * k + c];
      }
    }
  }
  return inv;
}

// The column-at-a-time algorithm, each row on its own.
QuantizedTensor reference_gptq(const Inputs& in, int n, int k, const QuantScheme& scheme,
                               const GptqOptions& options) {
  QuantizedTensor t = zero_quantized_tensor(n, k, scheme);
  const std::int64_t g = t.group, groups = t.groups();

  // The damped Hessian in natural order, dead channels cut off.
  std::vector<double> h = in.gram;
  std::vector<bool> dead(std::size_t(k), false);
  double mean_diag = 0;
  for (int j = 0; j < k; ++j) {
    if (h[std::size_t(j) * k + j] == 0) dead[std::size_t(j)] = true;
    mean_diag += dead[std::size_t(j)] ? 1.0 : h[std::size_t(j) * k + j];
  }
  mean_diag /= k;
  for (int a = 0; a < k; ++a)
    for (int b = 0; b < k; ++b)
      if (dead[std::size_t(a)] || dead[std::size_t(b)]) h[std::size_t(a) * k + b] = 0;
  for (int j = 0; j < k; ++j)
    h[std::size_t(j) * k + j] =
        (dead[std::size_t(j)] ? 1.0 : in.gram[std::size_t(j) * k + j]) + options.damp * mean_diag;
  std::vector<int> order(static_cast<std::size_t>(k));
  std::iota(order.begin(), order.end(), 0);
  if (options.act_order)
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return h[std::size_t(a) * k + a] > h[std::size_t(b) * k + b];
    });
  const std::vector<double> h_inverse = inverse(h, k);

  for (int r = 0; r < n; ++r) {
    std::vector<double> w(static_cast<std::size_t>(k));
    for (int c = 0; c < k; ++c)
      w[std::size_t(c)] = dead[std::size_t(c)] ? 0.0 : in.weights[std::size_t(r) * k + c];
    std::vector<GroupParams> params(static_cast<std::size_t>(groups));
    std::vector<double> hi = h_inverse;  // shrinks to the columns not yet quantized
    // Natural order's clipping search: each grid factor scored by the loss the group's
    // columns accrue when quantized in turn, (w_c - deq)^2 / hi_cc, their errors pushed
    // into the group's later columns and hi downdated within the group.
    auto choose_by_loss = [&](std::int64_t j) {
      const std::int64_t first = j * g, end = std::min<std::int64_t>(k, (j + 1) * g);
      float lo = 0.f, top = 0.f;
      for (std::int64_t c = first; c < end; ++c) {
        lo = std::min(lo, float(w[std::size_t(c)]));
        top = std::max(top, float(w[std::size_t(c)]));
      }
      double best_loss = 0;
      const std::vector<GroupParams> candidates =
          clip_candidates(lo, top, scheme.bits, scheme.asymmetric);
      for (std::size_t grid = 0; grid < candidates.size(); ++grid) {
        const GroupParams& p = candidates[grid];
        std::vector<double> wg(w.begin() + first, w.begin() + end), hg;
        for (std::int64_t a = first; a < end; ++a)
          for (std::int64_t b = first; b < end; ++b) hg.push_back(hi[std::size_t(a * k + b)]);
        const std::int64_t n_g = end - first;
        double loss = 0;
        for (std::int64_t i = 0; i < n_g; ++i) {
          const int q =
              quantize_value(float(wg[std::size_t(i)]), p, scheme.bits, scheme.asymmetric);
          const double deq = double(p.scale) * (scheme.asymmetric ? q - p.zero_point : q);
          const double d = hg[std::size_t(i * n_g + i)], err = wg[std::size_t(i)] - deq;
          loss += err * err / d;
          for (std::int64_t jj = i + 1; jj < n_g; ++jj)
            wg[std::size_t(jj)] -= err / d * hg[std::size_t(i * n_g + jj)];
          const std::vector<double> row_i(hg.begin() + i * n_g, hg.begin() + (i + 1) * n_g);
          for (std::int64_t a = 0; a < n_g; ++a) {
            const double f_a = hg[std::size_t(a * n_g + i)] / d;
            for (std::int64_t b = 0; b < n_g; ++b)
              hg[std::size_t(a * n_g + b)] -= f_a * row_i[std::size_t(b)];
          }
        }
        if (grid == 0 || loss < best_loss) {
          params[std::size_t(j)] = p;
          best_loss = loss;
        }
      }
    };
    auto choose = [&](std::int64_t j) {
      if (options.clip_search && !options.act_order) return choose_by_loss(j);
      std::vector<float> values;
      for (std::int64_t c = j * g; c < std::min<std::int64_t>(k, (j + 1) * g); ++c)
        values.push_back(float(w[std::size_t(c)]));
      std::vector<double> weights;
      for (std::int64_t c = j * g; c < std::min<std::int64_t>(k, (j + 1) * g); ++c)
        weights.push_back(h[std::size_t(c) * k + c]);
      params[std::size_t(j)] =
          options.clip_search
              ? search_group_params(values.data(), weights.data(), std::int64_t(values.size()),
                                    scheme.bits, scheme.asymmetric)
              : choose_group_params(values.data(), std::int64_t(values.size()), scheme.bits,
                                    scheme.asymmetric);
    };
    if (options.act_order)
      for (std::int64_t j = 0; j < groups; ++j) choose(j);
    for (int i = 0; i < k; ++i) {
      const int c = order[std::size_t(i)];
      if (!options.act_order && c % g == 0) choose(c / g);
      const GroupParams& p = params[std::size_t(c / g)];
      const int q = quantize_value(float(w[std::size_t(c)]), p, scheme.bits, scheme.asymmetric);
      t.q[std::size_t(r * t.k_padded + c)] = std::int16_t(q);
      const double deq = double(p.scale) * (scheme.asymmetric ? q - p.zero_point : q);
      const double d = hi[std::size_t(c) * k + c];
      const double e = (w[std::size_t(c)] - deq) / d;
      for (int jj = i + 1; jj < k; ++jj) {
        const int cj = order[std::size_t(jj)];
        w[std::size_t(cj)] -= e * hi[std::size_t(c) * k + cj];
      }
      // Remove column c from the inverse: hi -= hi[:, c] hi[c, :] / hi[c][c].
      std::vector<double> row_c(hi.begin() + std::ptrdiff_t(c) * k,
                                hi.begin() + std::ptrdiff_t(c + 1) * k);
      for (int a = 0; a < k; ++a) {
        const double f = hi[std::size_t(a) * k + c] / d;
        for (int b = 0; b < k; ++b) hi[std::size_t(a) * k + b] -= f * row_c[std::size_t(b)];
      }
    }
    for (std::int64_t j = 0; j < groups; ++j) {
      t.scales[std::size_t(r * groups + j)] = params[std::size_t(j)].scale;
      t.zero_points[std::size_t(r * groups + j)] = params[std::size_t(j)].zero_point;
      for (std::int64_t c = std::max<std::int64_t>(k, j * g); c < (j + 1) * g; ++c)
        t.q[std::size_t(r * t.k_padded + c)] = std::int16_t(
            quantize_value(0.f, params[std::size_t(j)], scheme.bits, scheme.asymmetric));
    }
  }
  return t;
}

void expect_same(const QuantizedTensor& a, const QuantizedTensor& b, const std::string& what) {
  ASSERT_EQ(a.k_padded, b.k_padded) << what;
  ASSERT_EQ(a.group, b.group) << what;
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.q.size(); ++i) differ += a.q[i] != b.q[i];
  EXPECT_EQ(differ, 0u) << what << ": " << differ << " of " << a.q.size() << " values differ";
  EXPECT_EQ(a.scales, b.scales) << what;
  EXPECT_EQ(a.zero_points, b.zero_points) << what;
}

struct Case {
  int n, k;
  const char* scheme;
  int block;
  bool act_order;
  int dead_channel;
  bool clip_search = true;
};

TEST(Gptq, MatchesTheColumnAtATimeFloat64Algorithm) {
  const Case cases[] = {
      {7, 64, "int4-g32", 128, false, -1},
      {7, 64, "int4-g32", 8, false, 5},
      {9, 96, "int4-g32-asym", 128, false, 40},
      {9, 96, "int4-g32-asym", 48, true, -1},
      {5, 72, "int8", 16, false, 3},
      {5, 72, "int8", 128, true, 70},
      {70, 80, "int4-g16", 24, false, -1},
      {6, 40, "int4-g16-asym", 128, true, 0},
      {4, 136, "int8-g64-asym", 32, false, 100},
      {3, 132, "int4-g128", 128, false, -1},
  };
  unsigned seed = 1;
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      const Inputs in = random_inputs(c.n, c.k, 3 * c.k, c.dead_channel, seed);
      const QuantScheme scheme = parse_quant_scheme(c.scheme);
      GptqOptions options;
      options.block = c.block;
      options.act_order = c.act_order;
      options.clip_search = c.clip_search;
      const GptqHessian hessian(in.gram, c.k, options, "test");
      const QuantizedTensor got =
          gptq_quantize(in.weights.data(), c.n, c.k, scheme, hessian, threads);
      const QuantizedTensor want = reference_gptq(in, c.n, c.k, scheme, options);
      expect_same(got, want,
                  std::string(c.scheme) + " n " + std::to_string(c.n) + " k " +
                      std::to_string(c.k) + " block " + std::to_string(c.block) +
                      (c.act_order ? " act-order" : "") + (c.clip_search ? "" : " no clip") +
                      " threads " + std::to_string(threads));
    }
    ++seed;
  }
}

TEST(Gptq, DiagonalHessianIsRoundToNearest) {
  const int n = 11, k = 96;
  const Inputs in = random_inputs(n, k, 8, -1, 7);
  std::vector<double> diagonal(std::size_t(k) * k, 0.0);
  for (int j = 0; j < k; ++j) diagonal[std::size_t(j) * k + j] = 0.5 + j % 5;
  for (const char* name : {"int4-g32", "int4-g32-asym", "int8", "int8-g32-asym"}) {
    const QuantScheme scheme = parse_quant_scheme(name);
    GptqOptions options;
    options.clip_search = false;
    const GptqHessian hessian(diagonal, k, options, "test");
    expect_same(gptq_quantize(in.weights.data(), n, k, scheme, hessian),
                quantize_reference(in.weights.data(), n, k, scheme), name);
  }
}

// The candidates start with round-to-nearest's parameters; symmetric int4's grid also
// holds each shrunk scale negated (the extra level -8 on the other side), the others'
// only the shrunk ranges.
TEST(Gptq, ClipCandidatesStartWithRoundToNearest) {
  for (const char* name : {"int4-g32", "int4-g32-asym", "int8-g32", "int8-g32-asym"}) {
    const QuantScheme scheme = parse_quant_scheme(name);
    const float lo = -1.5f, hi = 2.f;
    const std::vector<GroupParams> c = clip_candidates(lo, hi, scheme.bits, scheme.asymmetric);
    const GroupParams rtn = group_params_from_range(lo, hi, scheme.bits, scheme.asymmetric);
    ASSERT_FALSE(c.empty());
    EXPECT_EQ(c.front().scale, rtn.scale) << name;
    EXPECT_EQ(c.front().zero_point, rtn.zero_point) << name;
    const bool signed_grid = scheme.bits == 4 && !scheme.asymmetric;
    EXPECT_EQ(c.size(), std::size_t(signed_grid ? 1 + 2 * kClipGrid : kClipGrid)) << name;
    int negative = 0;
    for (const GroupParams& p : c) {
      negative += p.scale < 0;
      EXPECT_LE(std::fabs(p.scale), std::fabs(c[signed_grid ? 1 : 0].scale)) << name;
    }
    // int4: round-to-nearest puts the extreme 2 on -8 (a negative scale) and the grid
    // holds 21 negated scales beside it.
    EXPECT_EQ(negative, signed_grid ? kClipGrid + 1 : 0) << name;
  }
}

// The clipping search picks a range of its grid, never one worse than the full range.
TEST(Gptq, ClippingSearchNeverWorseThanTheFullRange) {
  std::mt19937 rng(5);
  std::student_t_distribution<float> heavy(3.f);
  int improved = 0;
  for (const char* name : {"int4-g32", "int4-g32-asym", "int8-g32", "int8-g32-asym"}) {
    const QuantScheme scheme = parse_quant_scheme(name);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(32);
      std::vector<double> w(32);
      for (int i = 0; i < 32; ++i) {
        v[std::size_t(i)] = heavy(rng);
        w[std::size_t(i)] = 0.1 + (i * 7 % 5);
      }
      const auto error = [&](const GroupParams& p) {
        double e = 0;
        for (int i = 0; i < 32; ++i) {
          const int q = quantize_value(v[std::size_t(i)], p, scheme.bits, scheme.asymmetric);
          const double d = v[std::size_t(i)] - double(p.scale) * (q - p.zero_point);
          e += w[std::size_t(i)] * d * d;
        }
        return e;
      };
      const GroupParams full = choose_group_params(v.data(), 32, scheme.bits, scheme.asymmetric);
      const GroupParams got =
          search_group_params(v.data(), w.data(), 32, scheme.bits, scheme.asymmetric);
      ASSERT_LE(error(got), error(full)) << name;
      improved += error(got) < error(full);
      float lo = 0, hi = 0;
      for (float x : v) lo = std::min(lo, x), hi = std::max(hi, x);
      bool on_grid = false;
      double least = error(full);
      for (const GroupParams& c : clip_candidates(lo, hi, scheme.bits, scheme.asymmetric)) {
        on_grid |= c.scale == got.scale && c.zero_point == got.zero_point && error(c) == error(got);
        least = std::min(least, error(c));
      }
      EXPECT_EQ(error(got), least) << name;
      EXPECT_TRUE(on_grid) << name;
    }
  }
  EXPECT_GT(improved, 200) << "heavy-tailed groups should often gain from clipping";
}

TEST(Gptq, OutputErrorWellBelowRoundToNearest) {
  const int n = 48, k = 128;
  for (const char* name : {"int4-g32", "int4-g128", "int4-g32-asym", "int8"}) {
    const Inputs in = random_inputs(n, k, 4 * k, -1, 11);
    const QuantScheme scheme = parse_quant_scheme(name);
    const double rtn = output_error(in.weights.data(),
                                    quantize_reference(in.weights.data(), n, k, scheme), in.gram);
    for (bool act_order : {false, true}) {
      GptqOptions options;
      options.act_order = act_order;
      const GptqHessian hessian(in.gram, k, options, "test");
      const double gptq = output_error(
          in.weights.data(), gptq_quantize(in.weights.data(), n, k, scheme, hessian), in.gram);
      EXPECT_LT(gptq, 0.7 * rtn) << name << (act_order ? " act-order" : "") << ": GPTQ " << gptq
                                 << " vs round-to-nearest " << rtn;
    }
  }
}

TEST(Gptq, RefusesWhatItCannotServe) {
  const int n = 4, k = 32;
  const Inputs in = random_inputs(n, k, 64, -1, 3);
  const GptqHessian hessian(in.gram, k, {}, "blk.0.attn_qkv");
  try {
    gptq_quantize(in.weights.data(), n, k, parse_quant_scheme("int8-tensor"), hessian);
    FAIL() << "per-tensor accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-channel or per-group"), std::string::npos)
        << e.what();
  }
  std::vector<double> bad = in.gram;
  bad[5 * k + 5] = std::nan("");
  EXPECT_THROW(GptqHessian(bad, k, {}, "blk.0.attn_qkv"), Error);
  // Not positive semi-definite: damping cannot save it, and the error says what to do.
  std::vector<double> indefinite(std::size_t(k) * k, 0.0);
  for (int j = 0; j < k; ++j) indefinite[std::size_t(j) * k + j] = 1;
  indefinite[1] = indefinite[k] = 5;
  try {
    GptqHessian(indefinite, k, {}, "blk.0.ffn_down");
    FAIL() << "an indefinite Hessian accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.0.ffn_down"), std::string::npos) << e.what();
  }
  GptqOptions wrong;
  wrong.damp = 1.5;
  EXPECT_THROW(GptqHessian(in.gram, k, wrong, "x"), Error);
}

}  // namespace
}  // namespace qforge
