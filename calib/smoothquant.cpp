#include "calib/smoothquant.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "calib/blas_library.h"
#include "calib/calibrator.h"
#include "calib/input_scaling.h"
#include "jit/base/error.h"
#include "ops/quant/quantize.h"

namespace qforge {
namespace {

double outlier_ratio(std::vector<double> v) {
  if (v.empty()) return 0;
  const double largest = *std::max_element(v.begin(), v.end());
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  const double median = v[v.size() / 2];
  return median > 0 ? largest / median : 0;
}

// ||deq(q8(X / s)) deq(Q(W diag(s)))^T - X W^T||^2 over the m sample rows, the weights
// quantized by `scheme`, the inputs int8 per row (max |x| / 127, round half away) as the
// kernels quantize them (ops/quant/activation.h).
double w8a8_output_error(const std::vector<float>& x, std::int64_t m, std::int64_t k,
                         const std::vector<float>& w, std::int64_t n, const std::vector<double>& s,
                         const QuantScheme& scheme, const std::vector<float>& reference) {
  std::vector<float> xq(x.size()), ws(w.size());
  for (std::int64_t r = 0; r < m; ++r) {
    float top = 0;
    for (std::int64_t c = 0; c < k; ++c)
      top = std::max(top,
                     std::fabs(static_cast<float>(x[std::size_t(r * k + c)] / s[std::size_t(c)])));
    const float a = top / 127.f;
    for (std::int64_t c = 0; c < k; ++c) {
      const auto v = static_cast<float>(x[std::size_t(r * k + c)] / s[std::size_t(c)]);
      xq[std::size_t(r * k + c)] =
          a > 0 ? std::clamp(round_half_away_scalar(v / a), -127.f, 127.f) * a : 0.f;
    }
  }
  for (std::size_t i = 0; i < w.size(); ++i)
    ws[i] = static_cast<float>(w[i] * s[i % std::size_t(k)]);
  const std::vector<float> wq = dequantize(quantize_reference(ws.data(), n, k, scheme));
  std::vector<float> y(std::size_t(m * n));
  blas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.f, xq.data(),
               int(k), wq.data(), int(k), 0.f, y.data(), int(n));
  double error = 0;
  for (std::size_t i = 0; i < y.size(); ++i)
    error += double(y[i] - reference[i]) * (y[i] - reference[i]);
  return error;
}

}  // namespace

std::vector<double> smoothquant_scales(std::span<const float> activation_absmax,
                                       const std::vector<std::vector<float>>& weights,
                                       double alpha) {
  const std::size_t k = activation_absmax.size();
  std::vector<double> weight_absmax(k, 0.0);
  for (const std::vector<float>& w : weights)
    for (std::size_t i = 0; i < w.size(); ++i)
      weight_absmax[i % k] = std::max(weight_absmax[i % k], double(std::fabs(w[i])));
  std::vector<double> s(k, 1.0);
  for (std::size_t j = 0; j < k; ++j) {
    const double x = activation_absmax[j], w = weight_absmax[j];
    if (x > 0 && w > 0) s[j] = std::clamp(std::pow(x, alpha) / std::pow(w, 1 - alpha), 1e-5, 1e5);
  }
  return s;
}

SmoothQuantSummary apply_smoothquant(ModelFile& model, const Precision& precision,
                                     const SmoothQuantSource& source, double alpha, int threads,
                                     const std::function<void(int, int)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  const bool search = alpha == kSmoothQuantAuto;
  QF_REQUIRE(search || (alpha >= 0 && alpha <= 1), "--sq-alpha ", alpha,
             ": expected a value in [0, 1] or auto");
  QF_REQUIRE(!search || source.file == nullptr,
             "--sq-alpha auto needs --calib-text: its search runs the layers on sampled "
             "activation rows, which a calibration file does not hold");
  QF_REQUIRE(precision.quantized && !precision.native, "--smoothquant with --quant ",
             to_string(precision),
             ": SmoothQuant eases int8 activations; give an integer scheme (--quant int8, "
             "int4-g<G>)");
  const std::vector<PlannedLayer> plan = plan_linear_layers(model, precision);
  const LlamaConfig& c = model.config();
  SmoothQuantSummary summary;
  std::vector<double> before, after;  // per site outlier ratios
  const auto smooth_block = [&](int l, const auto& absmax_of, const auto& samples_of) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    for (const PlannedLayer& layer : plan) {
      if (!layer.name.starts_with(prefix) || layer.choice.kind != TensorChoice::Kind::quantized)
        continue;
      const std::span<const float> absmax = absmax_of(layer.name);
      std::vector<std::vector<float>> weights;
      for (const std::string& name : layer.tensors) weights.push_back(tensor_f32(model, name));
      const std::string site = layer.name.substr(prefix.size());
      const auto scales = [&](double a) {
        std::vector<double> s = smoothquant_scales(absmax, weights, a);
        if (site == "attn_output") tie_scales(s, c);
        return s;
      };
      double chosen = alpha;
      if (search) {
        const std::vector<float>& x = samples_of(layer.name);
        const std::int64_t k = static_cast<std::int64_t>(absmax.size());
        const std::int64_t m = static_cast<std::int64_t>(x.size()) / k;
        std::vector<float> w;
        for (const std::vector<float>& part : weights) w.insert(w.end(), part.begin(), part.end());
        const std::int64_t n = static_cast<std::int64_t>(w.size()) / k;
        std::vector<float> reference(std::size_t(m * n));
        blas().sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.f, x.data(),
                     int(k), w.data(), int(k), 0.f, reference.data(), int(n));
        double best = 0;
        for (int i = 3; i <= 9; ++i) {
          const double a = i / 10.0;
          const double e =
              w8a8_output_error(x, m, k, w, n, scales(a), layer.choice.scheme, reference);
          if (i == 3 || e < best) {
            best = e;
            chosen = a;
          }
        }
      }
      std::vector<double> s = scales(chosen);
      summary.alphas.emplace_back(layer.name, chosen);
      fold_input_scales(model, l, site, s);
      summary.input_scales[layer.name] = s;
      std::vector<double> x(absmax.begin(), absmax.end()), y(x.size());
      for (std::size_t j = 0; j < x.size(); ++j) y[j] = x[j] / s[j];
      before.push_back(outlier_ratio(x));
      after.push_back(outlier_ratio(y));
      ++summary.layers;
    }
  };
  if (source.file != nullptr) {
    source.file->check_model(c, model.path());
    for (int l = 0; l < c.n_layers; ++l) {
      smooth_block(
          l, [&](const std::string& name) { return source.file->site(name).absmax; },
          [](const std::string&) -> const std::vector<float>& {
            fail("smoothquant: no sample rows in a calibration file");
          });
      if (progress) progress(l + 1, c.n_layers);
    }
  } else {
    QF_REQUIRE(!source.chunks.empty(), "--smoothquant: no calibration chunks");
    calibrate_model_blocks(
        model, source.chunks, /*gram=*/false, threads,
        [&](int l, const BlockSites& sites, LlamaWeights&, const BlockRerun&) {
          smooth_block(
              l,
              [&](const std::string& name) {
                return std::span<const float>(sites.at(name).absmax);
              },
              [&](const std::string& name) -> const std::vector<float>& {
                return sites.at(name).samples;
              });
          return BlockStep::next;  // folding keeps the function: the next inputs stay
        },
        progress, search ? kSmoothQuantSampleRows : 0);
  }
  summary.largest_outlier_before =
      before.empty() ? 0 : *std::max_element(before.begin(), before.end());
  summary.largest_outlier_after = after.empty() ? 0 : *std::max_element(after.begin(), after.end());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace qforge
