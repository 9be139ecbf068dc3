#include "calib/gptq_model.h"

#include <chrono>
#include <map>
#include <memory>

#include "calib/calibrator.h"
#include "jit/base/error.h"

namespace qforge {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The layers GPTQ serves: those the precision quantizes, bar the classifier.
std::vector<PlannedLayer> served_layers(const ModelFile& model, const Precision& precision) {
  QF_REQUIRE(precision.quantized, "--gptq with --quant ", to_string(precision),
             ": GPTQ chooses integers, and a dense model has none; give --quant int8 or "
             "int4-g<G>[-asym]");
  QF_REQUIRE(!precision.native, "--gptq needs --quant SCHEME: a native run keeps the file's own ",
             "quantized blocks (", model.path(), ")");
  std::vector<PlannedLayer> out;
  for (PlannedLayer& layer : plan_linear_layers(model, precision))
    if (layer.name != "output" && layer.choice.kind == TensorChoice::Kind::quantized)
      out.push_back(std::move(layer));
  QF_REQUIRE(!out.empty(), "--gptq: every linear layer of ", model.path(),
             " is kept dense or native by the policy; nothing to quantize");
  return out;
}

// GPTQ of every tensor of `layer` with the Hessian of its input's Gram matrix.
int quantize_layer(ModelFile& model, const PlannedLayer& layer, std::span<const double> gram, int k,
                   const GptqOptions& options, int threads) {
  const GptqHessian hessian(gram, k, options, layer.name, threads);
  for (const std::string& name : layer.tensors) {
    const TensorView& t = model.tensor(name);
    std::vector<float> w(static_cast<std::size_t>(t.rows * t.columns));
    for (std::int64_t r = 0; r < t.rows; ++r)
      t.row_to_f32(r, std::span<float>(w.data() + r * t.columns, std::size_t(t.columns)));
    // After AWQ's scaling the method is both.
    const std::string method = model.prequantized_method(name) == "awq" ? "awq+gptq" : "gptq";
    model.set_prequantized(
        name, gptq_quantize(w.data(), t.rows, t.columns, layer.choice.scheme, hessian, threads),
        method);
  }
  return static_cast<int>(layer.tensors.size());
}

}  // namespace

GptqSummary apply_gptq(ModelFile& model, const Precision& precision, const GptqSource& source,
                       const GptqOptions& options, int threads, const GptqProgress& progress) {
  const auto start = Clock::now();
  const std::vector<PlannedLayer> layers = served_layers(model, precision);
  const LlamaConfig& c = model.config();
  GptqSummary summary;
  double gptq_seconds = 0;
  const auto quantize = [&](const PlannedLayer& layer, std::span<const double> gram, int k) {
    const auto t0 = Clock::now();
    summary.tensors += quantize_layer(model, layer, gram, k, options, threads);
    ++summary.layers;
    gptq_seconds += seconds_since(t0);
  };

  if (source.file != nullptr) {  // one-shot, from the file's Gram matrices
    const CalibrationFile& file = *source.file;
    file.check_model(c, model.path());
    QF_REQUIRE(file.source().gram, file.path(),
               ": has no Gram matrices (calibrated without --gram); GPTQ's Hessians are made "
               "of them: run qforge calibrate --gram");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const CalibrationSite& site = file.site(layers[i].name);
      summary.calibration_tokens = site.count;
      const std::vector<double>* scales = nullptr;
      if (source.input_scales != nullptr) {
        const auto it = source.input_scales->find(layers[i].name);
        if (it != source.input_scales->end()) scales = &it->second;
      }
      if (scales != nullptr) {
        const std::vector<double>& s = *scales;
        const auto k = static_cast<std::size_t>(site.k);
        std::vector<double> gram(site.gram.begin(), site.gram.end());
        for (std::size_t a = 0; a < k; ++a)
          for (std::size_t b = 0; b < k; ++b) gram[a * k + b] /= s[a] * s[b];
        quantize(layers[i], gram, site.k);
      } else {
        quantize(layers[i], site.gram, site.k);
      }
      if (progress) progress(static_cast<int>(i + 1), static_cast<int>(layers.size()));
    }
  } else {  // sequential: the calibration pass, each block quantized before the next
    QF_REQUIRE(!source.chunks.empty(), "--gptq: no calibration chunks");
    summary.sequential = true;
    const int ctx = static_cast<int>(source.chunks.front().size());
    summary.calibration_tokens = source.chunks.size() * static_cast<std::uint64_t>(ctx);
    std::size_t next = 0;  // the next layer of `layers` to quantize
    calibrate_model_blocks(
        model, source.chunks, /*gram=*/true, threads,
        [&](int l, const BlockSites& sites, LlamaWeights& weights, const BlockRerun&) {
          const std::string prefix = "blk." + std::to_string(l) + ".";
          bool changed = false;
          for (; next < layers.size() && layers[next].name.starts_with(prefix); ++next) {
            const SiteStatistics& site = sites.at(layers[next].name);
            quantize(layers[next], site.gram, site.k);
            weights.linear_slot(layers[next].name) =
                build_linear_layer(model, layers[next], threads);
            changed = true;
            if (source.true_sequential) {  // the rest on what this one computes
              ++next;
              break;
            }
          }
          if (!changed) return BlockStep::next;
          const bool more = next < layers.size() && layers[next].name.starts_with(prefix);
          return more ? BlockStep::again : BlockStep::advance;
        },
        progress);
  }
  summary.gptq_seconds = gptq_seconds;
  summary.seconds = seconds_since(start);
  return summary;
}

}  // namespace qforge
