#include "calib/quant_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "calib/kld_evaluator.h"
#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/runtime/jit_linear.h"
#include "model/runtime/perplexity.h"
#include "ops/quant/activation.h"
#include "ops/quant/pack.h"
#include "ops/quant/quantize.h"

namespace qforge {
namespace {

// Each layer input forward() produced, by layer name.
class InputCapture final : public LinearInputObserver {
 public:
  void observe(int layer, LinearSite site, const float* x, int rows, int k) override {
    const std::string name = site == LinearSite::classifier
                                 ? "output"
                                 : "blk." + std::to_string(layer) + "." + site_name(site);
    std::vector<float>& rows_of = inputs[name];
    rows_of.insert(rows_of.end(), x, x + static_cast<std::size_t>(rows) * k);
  }
  std::map<std::string, std::vector<float>> inputs;
};

struct ErrorSum {
  double error = 0, energy = 0;
  void add(double got, double want) {
    error += (got - want) * (got - want);
    energy += want * want;
  }
  double relative() const { return energy > 0 ? std::sqrt(error / energy) : 0.0; }
};

// The source tensors of a layer, as the executor fuses them.
std::vector<const TensorView*> layer_sources(const ModelFile& file, const std::string& layer) {
  if (layer == "output") return {&file.classifier()};
  const std::size_t dot = layer.find('.', 4);
  const int l = std::stoi(layer.substr(4, dot - 4));
  const std::string role = layer.substr(dot + 1);
  auto t = [&](const char* r) { return &file.layer_tensor(l, r); };
  if (role == "attn_qkv") return {t("attn_q"), t("attn_k"), t("attn_v")};
  if (role == "ffn_gate_up") return {t("ffn_gate"), t("ffn_up")};
  return {&file.layer_tensor(l, role)};
}

// ||W_q - W|| / ||W||: W_q read back from the quantized layer's packed weights (what a
// method such as GPTQ chose, or round-to-nearest's), or W rounded to bf16 for a bf16
// layer; 0 for an f32 layer.
double weight_error(const std::vector<const TensorView*>& sources, const LinearLayer& layer,
                    const std::string& scheme) {
  std::vector<float> back;
  if (const auto* jit = dynamic_cast<const JitLinear*>(&layer)) {
    const PackedWeights& packed = jit->quantized().weights();
    back = dequantize(unpack_weights(packed, 0));
    if (layer.fusion() == LinearFusion::swiglu) {
      const std::vector<float> up = dequantize(unpack_weights(packed, 1));
      back.insert(back.end(), up.begin(), up.end());
    }
  } else if (scheme != "bf16") {
    return 0.0;
  }
  ErrorSum sum;
  std::size_t at = 0;
  for (const TensorView* t : sources) {
    std::vector<float> w(static_cast<std::size_t>(t->rows * t->columns));
    for (std::int64_t r = 0; r < t->rows; ++r)
      t->row_to_f32(r, std::span<float>(w.data() + r * t->columns, t->columns));
    for (std::size_t i = 0; i < w.size(); ++i)
      sum.add(back.empty() ? bf16_to_f32(f32_to_bf16(w[i])) : back.at(at + i), w[i]);
    at += w.size();
  }
  QF_REQUIRE(back.empty() || at == back.size(), "quant-report: the packed layer holds ",
             back.size(), " weights, its tensors ", at);
  return sum.relative();
}

// The layer's outputs on rows x k inputs, kChunkRows rows per call as the executor calls.
std::vector<float> layer_outputs(LinearLayer& layer, const std::vector<float>& x,
                                 ThreadPool& pool) {
  const std::int64_t k = layer.k(), n = layer.n();
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / k;
  std::vector<float> out(static_cast<std::size_t>(rows * n), 0.f);  // residual adds onto 0
  for (std::int64_t r = 0; r < rows; r += LlamaExecutor::kChunkRows) {
    const std::int64_t m = std::min<std::int64_t>(LlamaExecutor::kChunkRows, rows - r);
    layer.forward(x.data() + r * k, m, k, out.data() + r * n, n, pool);
  }
  return out;
}

// ||deq(q8(x)) - x|| / ||x|| with per-row int8 scales, as ops/quant/activation.h quantizes.
double activation_error(const std::vector<float>& x, std::int64_t k) {
  ErrorSum sum;
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(k); ++r) {
    const float* row = x.data() + r * k;
    float absmax = 0;
    for (std::int64_t i = 0; i < k; ++i) absmax = std::max(absmax, std::abs(row[i]));
    const float a = absmax / 127.f;
    for (std::int64_t i = 0; i < k; ++i) {
      const float q = a > 0 ? std::clamp(round_half_away(row[i] / a), -127.f, 127.f) : 0.f;
      sum.add(double(q) * a, row[i]);
    }
  }
  return sum.relative();
}

double outlier_ratio(const std::vector<float>& x, std::int64_t k) {
  std::vector<float> absmax(static_cast<std::size_t>(k), 0.f);
  for (std::size_t i = 0; i < x.size(); ++i)
    absmax[i % k] = std::max(absmax[i % k], std::abs(x[i]));
  const float top = *std::max_element(absmax.begin(), absmax.end());
  const auto mid = absmax.begin() + static_cast<std::ptrdiff_t>(absmax.size() / 2);
  std::nth_element(absmax.begin(), mid, absmax.end());
  return *mid > 0 ? top / *mid : 0.0;
}

}  // namespace

std::vector<std::string> layer_tensor_patterns(const std::string& layer) {
  if (layer == "output") return {"output"};
  const std::string block = layer.substr(0, layer.find('.', 4) + 1);
  const std::string role = layer.substr(block.size());
  if (role == "attn_qkv") return {block + "attn_q", block + "attn_k", block + "attn_v"};
  if (role == "ffn_gate_up") return {block + "ffn_gate", block + "ffn_up"};
  return {layer};
}

QuantReport make_quant_report(ModelSession& f32, ModelSession& quantized,
                              std::span<const int> tokens, const QuantReportOptions& o, int threads,
                              const ReportProgress& progress) {
  LlamaWeights& fw = f32.model.weights;
  LlamaWeights& qw = quantized.model.weights;
  const LlamaConfig& c = fw.config;
  QF_REQUIRE(o.ctx >= 2 && o.ctx <= c.seq_len, "--ctx ", o.ctx, ": 2 .. ", c.seq_len);
  const auto whole_chunks = static_cast<int>(tokens.size() / static_cast<std::size_t>(o.ctx));
  QF_REQUIRE(whole_chunks >= 1, "the text holds ", tokens.size(),
             " tokens, fewer than one chunk of --ctx ", o.ctx);
  const int chunks = o.max_chunks > 0 ? std::min(o.max_chunks, whole_chunks) : whole_chunks;
  const std::span<const int> text = tokens.first(static_cast<std::size_t>(chunks) * o.ctx);
  // The f32 session gets a pool of every thread: the JIT layers swapped into it use it.
  f32.pool = std::make_unique<ThreadPool>(threads);
  f32.executor = std::make_unique<LlamaExecutor>(fw, *f32.pool, o.ctx);
  quantized.executor = std::make_unique<LlamaExecutor>(qw, *quantized.pool, o.ctx);
  const auto named = fw.named_layers();
  const int total = static_cast<int>(named.size()) + 2;
  int done = 0;
  auto step = [&] {
    if (progress) progress(++done, total);
  };

  // The f32 logits of every chunk, once; the reference of each KLD below.
  const int bos = quantized.model.tokenizer.prompt_bos_id();
  const KldEvaluator kld(*f32.executor, text, o.ctx, chunks, bos);
  QuantReport report;
  report.precision = to_string(qw.precision);
  report.policy = policy_summary(qw);
  report.ctx = o.ctx;
  report.chunks = chunks;
  const PerplexityResult full = kld.evaluate(*quantized.executor);
  report.full_kld = full.mean_kld;
  report.full_kld_stderr = full.kld_stderr;
  report.scored_tokens = full.scored_tokens;
  step();

  // Each layer's f32 inputs over the first capture chunks.
  InputCapture capture;
  f32.executor->set_observer(&capture);
  for (int i = 0; i < std::min(o.capture_chunks, chunks); ++i) {
    std::vector<int> chunk(text.begin() + i * o.ctx, text.begin() + (i + 1) * o.ctx);
    if (bos >= 0) chunk[0] = bos;
    f32.executor->forward(chunk, 0, true);
  }
  f32.executor->set_observer(nullptr);
  step();

  ModelFile file = open_model(f32.path);
  if (o.replaced != nullptr)
    for (const auto& [tensor, values] : *o.replaced) file.replace_tensor(tensor, values);
  std::map<std::string, std::string> schemes(qw.policy.begin(), qw.policy.end());
  for (const auto& [name, f32_layer] : named) {
    LayerQuantReport r;
    r.name = name;
    r.kind = name == "output" ? "output" : name.substr(name.find('.', 4) + 1);
    r.scheme = schemes.at(name);
    std::unique_ptr<LinearLayer>& f32_slot = fw.linear_slot(name);
    std::unique_ptr<LinearLayer>& q_slot = qw.linear_slot(name);
    r.f32_bytes = f32_slot->weight_bytes();
    r.quantized_bytes = q_slot->weight_bytes();
    r.weight_rel_rms = weight_error(layer_sources(file, name), *q_slot, r.scheme);
    const std::vector<float>& x = capture.inputs.at(name);
    const std::vector<float> want = layer_outputs(*f32_slot, x, *f32.pool);
    const std::vector<float> got = layer_outputs(*q_slot, x, *f32.pool);
    ErrorSum out;
    for (std::size_t i = 0; i < want.size(); ++i) out.add(got[i], want[i]);
    r.output_rel_rms = out.relative();
    r.output_snr_db = r.output_rel_rms > 0 ? -20.0 * std::log10(r.output_rel_rms) : INFINITY;
    r.outlier_ratio = outlier_ratio(x, f32_slot->k());
    r.activation_rel_rms = activation_error(x, f32_slot->k());
    // Only this layer quantized: swapped into the f32 model and back.
    std::swap(f32_slot, q_slot);
    try {
      const PerplexityResult one = kld.evaluate(*f32.executor);
      r.sensitivity_kld = one.mean_kld;
      r.sensitivity_kld_stderr = one.kld_stderr;
    } catch (...) {
      std::swap(f32_slot, q_slot);
      throw;
    }
    std::swap(f32_slot, q_slot);
    report.layers.push_back(r);
    step();
  }
  return report;
}

}  // namespace qforge
