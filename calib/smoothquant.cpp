#include "calib/smoothquant.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "calib/calibrator.h"
#include "calib/input_scaling.h"
#include "jit/base/error.h"

namespace qforge {
namespace {

double outlier_ratio(std::vector<double> v) {
  if (v.empty()) return 0;
  const double largest = *std::max_element(v.begin(), v.end());
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  const double median = v[v.size() / 2];
  return median > 0 ? largest / median : 0;
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
  QF_REQUIRE(alpha >= 0 && alpha <= 1, "--sq-alpha ", alpha, ": expected a value in [0, 1]");
  QF_REQUIRE(precision.quantized && !precision.native, "--smoothquant with --quant ",
             to_string(precision),
             ": SmoothQuant eases int8 activations; give an integer scheme (--quant int8, "
             "int4-g<G>)");
  const std::vector<PlannedLayer> plan = plan_linear_layers(model, precision);
  const LlamaConfig& c = model.config();
  SmoothQuantSummary summary;
  std::vector<double> before, after;  // per site outlier ratios
  const auto smooth_block = [&](int l, const auto& absmax_of) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    for (const PlannedLayer& layer : plan) {
      if (!layer.name.starts_with(prefix) || layer.choice.kind != TensorChoice::Kind::quantized)
        continue;
      const std::span<const float> absmax = absmax_of(layer.name);
      std::vector<std::vector<float>> weights;
      for (const std::string& name : layer.tensors) weights.push_back(tensor_f32(model, name));
      std::vector<double> s = smoothquant_scales(absmax, weights, alpha);
      const std::string site = layer.name.substr(prefix.size());
      if (site == "attn_output") tie_scales(s, c);
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
      smooth_block(l, [&](const std::string& name) { return source.file->site(name).absmax; });
      if (progress) progress(l + 1, c.n_layers);
    }
  } else {
    QF_REQUIRE(!source.chunks.empty(), "--smoothquant: no calibration chunks");
    calibrate_model_blocks(
        model, source.chunks, /*gram=*/false, threads,
        [&](int l, const BlockSites& sites, LlamaWeights&) {
          smooth_block(l, [&](const std::string& name) {
            return std::span<const float>(sites.at(name).absmax);
          });
          return BlockStep::next;  // folding keeps the function: the next inputs stay
        },
        progress);
  }
  summary.largest_outlier_before =
      before.empty() ? 0 : *std::max_element(before.begin(), before.end());
  summary.largest_outlier_after = after.empty() ? 0 : *std::max_element(after.begin(), after.end());
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace qforge
