#include "calib/awq_model.h"

#include <chrono>
#include <memory>

#include "calib/calibrator.h"
#include "calib/input_scaling.h"
#include "jit/base/error.h"
#include "model/runtime/dense_linear.h"

namespace qforge {
namespace {

// AWQ of block l's quantized layers with their inputs' statistics from `site_of(name)`.
class BlockScaler {
 public:
  BlockScaler(ModelFile& model, const std::vector<PlannedLayer>& plan, const AwqOptions& options,
              int threads, AwqSummary& summary)
      : model_(model), plan_(plan), options_(options), threads_(threads), summary_(summary) {}

  // output_error_of(layer): the block objective for that layer, or empty (the Gram form).
  template <typename SiteOf, typename OutputErrorOf>
  void block(int l, SiteOf&& site_of, OutputErrorOf&& output_error_of) {
    const LlamaConfig& c = model_.config();
    const std::string prefix = "blk." + std::to_string(l) + ".";
    struct Done {
      const PlannedLayer* layer;
      AwqInput input;
      std::vector<double> s;
    };
    std::vector<Done> done;
    // Every search on the block's weights as they came (no fold touches a matrix before
    // its own search), then the folds.
    for (const PlannedLayer& layer : plan_) {
      if (!layer.name.starts_with(prefix) || layer.choice.kind != TensorChoice::Kind::quantized)
        continue;
      const AwqInput input = site_of(layer.name);
      std::vector<std::vector<float>> weights;
      std::vector<const float*> pointers;
      std::vector<std::int64_t> rows;
      for (const std::string& name : layer.tensors) {
        weights.push_back(tensor_f32(model_, name));
        pointers.push_back(weights.back().data());
        rows.push_back(model_.tensor(name).rows);
      }
      const bool wo = layer.name.ends_with("attn_output");
      const int tie = wo ? c.n_heads / c.n_kv_heads : 1;
      const int period = wo ? c.dim / c.n_heads : 1;
      AwqScales scales = search_awq_scales(pointers, rows, input, layer.choice.scheme, options_,
                                           tie, period, threads_, output_error_of(layer));
      summary_.layers.push_back({layer.name, scales.alpha, scales.error, scales.rtn_error});
      done.push_back({&layer, input, std::move(scales.s)});
    }
    for (const Done& d : done)
      fold_input_scales(model_, l, d.layer->name.substr(prefix.size()), d.s);
    if (options_.clip)
      for (const Done& d : done) {
        // The input the layer now reads is x / s: its energy per channel E[x^2] / s^2.
        const std::size_t k = d.s.size();
        std::vector<double> energy(k), gram;
        for (std::size_t j = 0; j < k; ++j) energy[j] = d.input.mean_sq[j] / (d.s[j] * d.s[j]);
        if (!d.input.gram.empty()) {
          gram.resize(k * k);
          for (std::size_t a = 0; a < k; ++a)
            for (std::size_t b = 0; b < k; ++b)
              gram[a * k + b] = d.input.gram[a * k + b] / (d.s[a] * d.s[b]);
        }
        for (const std::string& name : d.layer->tensors) {
          const TensorView& t = model_.tensor(name);
          const std::vector<float> w = tensor_f32(model_, name);
          model_.set_prequantized(
              name,
              quantize_clipped(w.data(), t.rows, t.columns, d.layer->choice.scheme, energy.data(),
                               gram, threads_),
              "awq");
        }
      }
    for (const Done& d : done) summary_.input_scales[d.layer->name] = d.s;
  }

 private:
  ModelFile& model_;
  const std::vector<PlannedLayer>& plan_;
  const AwqOptions& options_;
  int threads_;
  AwqSummary& summary_;
};

// The block objective of `layer`: the block rerun over the first chunks with the layer's
// slot holding the candidate (dense f32, the dequantized matrices stacked in the layer's
// row order), its output's squared distance from `reference` per token, the slot restored.
AwqOutputError block_output_error(const PlannedLayer& layer, LlamaWeights& weights,
                                  const BlockRerun& rerun, const std::vector<float>& reference,
                                  int chunks, int dim) {
  return [&layer, &weights, &rerun, &reference, chunks,
          dim](const std::vector<std::vector<float>>& dequantized) {
    std::unique_ptr<LinearLayer>& slot = weights.linear_slot(layer.name);
    std::vector<float> stacked;
    for (const std::vector<float>& m : dequantized)
      stacked.insert(stacked.end(), m.begin(), m.end());
    QF_REQUIRE(static_cast<std::int64_t>(stacked.size()) ==
                   (slot->fusion() == LinearFusion::swiglu ? 2 : 1) * slot->n() * slot->k(),
               "AWQ: ", layer.name, ": candidate of another shape than the layer");
    std::unique_ptr<LinearLayer> original = std::move(slot);
    slot = std::make_unique<DenseLinear>(stacked.data(), original->n(), original->k(),
                                         original->fusion());
    const std::vector<float> out = rerun(chunks);
    slot = std::move(original);
    double error = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double d = static_cast<double>(out[i]) - reference[i];
      error += d * d;
    }
    return error / static_cast<double>(out.size() / static_cast<std::size_t>(dim));
  };
}

}  // namespace

AwqSummary apply_awq(ModelFile& model, const Precision& precision, const AwqSource& source,
                     const AwqOptions& options, int threads, const AwqProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  QF_REQUIRE(precision.quantized, "--awq with --quant ", to_string(precision),
             ": AWQ scales weights for quantization, and a dense model has none; give --quant "
             "int8 or int4-g<G>[-asym]");
  QF_REQUIRE(!precision.native, "--awq needs --quant SCHEME: a native run keeps the file's own ",
             "quantized blocks (", model.path(), ")");
  const std::vector<PlannedLayer> plan = plan_linear_layers(model, precision);
  const LlamaConfig& c = model.config();
  AwqSummary summary;
  BlockScaler scaler(model, plan, options, threads, summary);
  if (source.file != nullptr) {
    const CalibrationFile& file = *source.file;
    file.check_model(c, model.path());
    QF_REQUIRE(options.objective == AwqObjective::layer,
               "--awq-objective block runs the blocks on calibration text: give --calib-text "
               "rather than the calibration file ",
               file.path());
    for (int l = 0; l < c.n_layers; ++l) {
      scaler.block(
          l,
          [&](const std::string& name) {
            const CalibrationSite& site = file.site(name);
            return AwqInput{name, site.k, site.mean_abs, site.mean_sq, site.gram};
          },
          [](const PlannedLayer&) { return AwqOutputError{}; });
      if (progress) progress(l + 1, c.n_layers);
    }
  } else {
    QF_REQUIRE(!source.chunks.empty(), "--awq: no calibration chunks");
    calibrate_model_blocks(
        model, source.chunks, /*gram=*/true, threads,
        [&](int l, const BlockSites& sites, LlamaWeights& weights, const BlockRerun& rerun) {
          const bool by_block = options.objective == AwqObjective::block;
          const std::vector<float> reference =
              by_block ? rerun(options.block_chunks) : std::vector<float>{};
          scaler.block(
              l,
              [&](const std::string& name) {
                const SiteStatistics& s = sites.at(name);
                return AwqInput{name, s.k, s.mean_abs, s.mean_sq, s.gram};
              },
              [&](const PlannedLayer& layer) {
                return by_block ? block_output_error(layer, weights, rerun, reference,
                                                     options.block_chunks, c.dim)
                                : AwqOutputError{};
              });
          return BlockStep::next;  // folding keeps the function: the next inputs stay
        },
        progress);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace qforge
