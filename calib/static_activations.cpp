#include "calib/static_activations.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>

#include "calib/calibrator.h"
#include "calib/input_scaling.h"
#include "jit/base/error.h"

namespace qforge {
namespace {

// max_j |x_j| / s_j over a site's channel maxima, as an int8 scale (a site whose
// calibration inputs were all 0 keeps a tiny positive scale: its inputs then saturate at
// +-127 of almost nothing, about 0).
float static_scale(const std::string& layer, std::span<const float> absmax,
                   const std::vector<double>* s) {
  double m = 0;
  for (std::size_t j = 0; j < absmax.size(); ++j)
    m = std::max(m, double(absmax[j]) / (s != nullptr ? (*s)[j] : 1.0));
  QF_REQUIRE(std::isfinite(m), "--act static: ", layer,
             "'s calibrated activation maximum is not finite");
  return m > 0 ? static_cast<float>(m / 127.0) : 1e-30f;
}

// One row's int8 rounding error with scale a, weighted per channel by `energy`; the
// quantizer as the kernels' path computes it (static: times the reciprocal, dynamic:
// divided, ops/quant/activation.h).
double row_error(const float* x, std::size_t k, float a, bool reciprocal,
                 const std::vector<double>& energy) {
  const float inverse = 1.f / a;
  double e = 0;
  for (std::size_t j = 0; j < k; ++j) {
    const float q =
        std::clamp(std::round(reciprocal ? x[j] * inverse : x[j] / a), -127.f, 127.f) * a;
    e += energy[j] * double(q - x[j]) * double(q - x[j]);
  }
  return e;
}

// The same error over sampled rows x (m x k) with each row quantized by its own max (the
// dynamic path).
double dynamic_error(const std::vector<float>& x, std::size_t k,
                     const std::vector<double>& column_energy) {
  double e = 0;
  for (std::size_t t = 0; k > 0 && t < x.size() / k; ++t) {
    const float* row = x.data() + t * k;
    float max_abs = 0;
    for (std::size_t j = 0; j < k; ++j) max_abs = std::max(max_abs, std::fabs(row[j]));
    if (max_abs > 0) e += row_error(row, k, max_abs / 127.f, false, column_energy);
  }
  return e;
}

// The clipping search on sampled rows x (m x k): among a = clip * max|x| / 127 for the
// grid kStaticClipGrid, the a whose int8 rounding error, weighted per channel by the
// squared norm of the weight column reading it (sum_n W[n][j]^2: the output error when
// channel errors are independent), is smallest; that error in `error`. Clipping trades
// the rare large values for resolution on the common small ones.
float searched_scale(float max_scale, const std::vector<float>& x, std::size_t k,
                     const std::vector<double>& column_energy, double* error) {
  float best_scale = max_scale;
  double best = -1;
  for (const double clip : kStaticClipGrid) {
    const float a = static_cast<float>(max_scale * clip);
    double e = 0;
    for (std::size_t t = 0; k > 0 && t < x.size() / k; ++t)
      e += row_error(x.data() + t * k, k, a, true, column_energy);
    if (best < 0 || e < best) {
      best = e;
      best_scale = a;
    }
  }
  *error = best;
  return best_scale;
}

std::vector<double> column_energy(const ModelFile& model, const PlannedLayer& layer, int k) {
  std::vector<double> energy(std::size_t(k), 0.0);
  for (const std::string& name : layer.tensors) {
    const std::vector<float> w = tensor_f32(model, name);
    for (std::size_t i = 0; i < w.size(); ++i) energy[i % std::size_t(k)] += double(w[i]) * w[i];
  }
  return energy;
}

}  // namespace

StaticActivationSummary apply_static_activations(ModelFile& model, const Precision& precision,
                                                 const StaticActivationSource& source, int threads,
                                                 const std::function<void(int, int)>& progress) {
  const auto start = std::chrono::steady_clock::now();
  QF_REQUIRE(precision.quantized, "--act ", source.fallback > 0 ? "auto" : "static",
             " with --quant ", to_string(precision),
             ": a dense model has no int8 activations; give an integer scheme");
  QF_REQUIRE(source.fallback == 0 || source.file == nullptr,
             "--act auto needs --calib-text: it compares static and per-token rounding on "
             "sampled input rows, which a calibration file does not hold");
  const std::vector<PlannedLayer> plan = plan_linear_layers(model, precision);
  const LlamaConfig& c = model.config();
  StaticActivationSummary summary;
  const auto scale_block = [&](int l, const auto& absmax_of, const auto& samples_of,
                               bool scaled_inputs) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    for (const PlannedLayer& layer : plan) {
      if (!layer.name.starts_with(prefix) || layer.choice.kind == TensorChoice::Kind::f32 ||
          layer.choice.kind == TensorChoice::Kind::bf16)
        continue;
      const std::vector<double>* s = nullptr;
      if (scaled_inputs && source.input_scales != nullptr) {
        const auto it = source.input_scales->find(layer.name);
        if (it != source.input_scales->end()) s = &it->second;
      }
      const std::span<const float> absmax = absmax_of(layer.name);
      StaticLayer out{layer.name, static_scale(layer.name, absmax, s), 0, true};
      if (const std::vector<float>* x = samples_of(layer.name); x != nullptr && !x->empty()) {
        const std::vector<double> energy =
            column_energy(model, layer, static_cast<int>(absmax.size()));
        double e = 0;
        out.scale = searched_scale(out.scale, *x, absmax.size(), energy, &e);
        const double dynamic = dynamic_error(*x, absmax.size(), energy);
        out.error_ratio = dynamic > 0 ? e / dynamic : 1.0;
        out.is_static = source.fallback == 0 || out.error_ratio <= source.fallback;
      }
      if (out.is_static)
        model.set_activation_scale(layer.name, out.scale);
      else
        model.clear_activation_scale(layer.name);  // a scale the file held, too
      summary.layers.push_back(out);
    }
  };
  if (source.file != nullptr) {
    source.file->check_model(c, model.path());
    for (int l = 0; l < c.n_layers; ++l) {
      scale_block(
          l, [&](const std::string& name) { return std::span(source.file->site(name).absmax); },
          [](const std::string&) -> const std::vector<float>* { return nullptr; }, true);
      if (progress) progress(l + 1, c.n_layers);
    }
  } else {
    QF_REQUIRE(!source.chunks.empty(), "--act ", source.fallback > 0 ? "auto" : "static",
               ": no calibration chunks");
    calibrate_model_blocks(
        model, source.chunks, /*gram=*/false, threads,
        [&](int l, const BlockSites& sites, LlamaWeights&, const BlockRerun&) {
          scale_block(
              l, [&](const std::string& name) { return std::span(sites.at(name).absmax); },
              [&](const std::string& name) { return &sites.at(name).samples; }, false);
          return BlockStep::next;
        },
        progress, kStaticSampleRows);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace qforge
