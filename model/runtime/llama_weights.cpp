#include "model/runtime/llama_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <new>
#include <optional>

#include <oneapi/dnnl/dnnl.hpp>

#include "jit/base/error.h"
#include "jit/base/parallel_for.h"
#include "model/format/ggml_repack.h"
#include "model/runtime/dense_linear.h"
#include "model/runtime/jit_linear.h"
#include "model/runtime/kv_cache.h"
#include "model/runtime/row_stacked_linear.h"
#include "model/runtime/tensor_policy.h"
#include "ops/quant/pack.h"

namespace qforge {
namespace {

// All rows of `tensor` as row-major f32, appended to `out` (rows converted in parallel).
void append_f32(const TensorView& tensor, std::vector<float>& out, int threads = 1) {
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(tensor.rows * tensor.columns));
  parallel_for(tensor.rows, tensor.rows * tensor.columns >= (1 << 20) ? threads : 1,
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t r = begin; r < end; ++r)
                   tensor.row_to_f32(r, std::span<float>(out.data() + start + r * tensor.columns,
                                                         static_cast<std::size_t>(tensor.columns)));
               });
}

std::vector<float> to_f32(const TensorView& tensor, int threads = 1) {
  std::vector<float> out;
  append_f32(tensor, out, threads);
  return out;
}

const QuantScheme kPerChannelInt8{};

// The source tensors of one linear layer, stacked by rows (q|k|v) or paired (gate, up).
using Sources = std::vector<const TensorView*>;

// Whether every one of `tensors` has a native form, all of one type (or, for a row stack
// such as q | k | v, each run of one type its own layer: RowStackedLinear).
bool all_native(const Sources& tensors, bool row_stack) {
  const std::optional<QuantScheme> first = native_scheme(*tensors[0]);
  for (const TensorView* t : tensors) {
    if (!native_scheme(*t)) return false;
    if (!row_stack && (native_scheme(*t) != first || t->type != tensors[0]->type)) return false;
  }
  return true;
}

// `tensors` split into runs of one type and native scheme (one run when they agree).
std::vector<Sources> native_runs(const Sources& tensors) {
  std::vector<Sources> runs;
  for (const TensorView* t : tensors) {
    const TensorView* last = runs.empty() ? nullptr : runs.back().back();
    if (last == nullptr || last->type != t->type || native_scheme(*last) != native_scheme(*t))
      runs.emplace_back();
    runs.back().push_back(t);
  }
  return runs;
}

// Whether every one of `tensors` is stored in the qforge encoding of exactly `scheme`:
// a layer given that scheme packs the file's values as they are.
bool all_encoded_as(const Sources& tensors, const QuantScheme& scheme) {
  for (const TensorView* t : tensors)
    if (!t->encoded || t->encoded->geometry.scheme != stored_form(scheme)) return false;
  return true;
}

// The rows of `tensors` stacked, as f32, in `out` (reused across layers: its pages are
// faulted in once, not once per tensor).
const std::vector<float>& stacked_f32(const Sources& tensors, int threads,
                                      std::vector<float>& out) {
  out.clear();
  for (const TensorView* t : tensors) append_f32(*t, out, threads);
  return out;
}

// Lets the kernel drop the file pages wholly inside [data, data + bytes): a tensor (or
// rows of it) already converted, so a model's file and its packed copy are not both
// resident (peak RSS stays near the packed size). Reading them again refaults them.
void release_range(const std::byte* data, std::uint64_t bytes) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void release_pages(const TensorView& tensor) {
  if (!tensor.in_memory) release_range(tensor.data, tensor.byte_size);
}

// After rows [first, first + count) of `tensor` are converted: releases the whole MiB
// windows of the tensor's bytes (counted from its start) that those rows complete, and
// the rest of the tensor at its last row. Once per MiB, not per call: each madvise
// shoots down the TLBs of every loading thread. ggml rows are whole blocks, so a row is
// byte_size / rows bytes.
void release_completed_windows(const TensorView& tensor, std::int64_t first, std::int64_t count) {
  if (tensor.rows <= 0 || tensor.in_memory) return;
  constexpr std::uint64_t kWindow = std::uint64_t{1} << 20;
  const std::uint64_t row_bytes = tensor.byte_size / static_cast<std::uint64_t>(tensor.rows);
  const std::uint64_t begin = static_cast<std::uint64_t>(first) * row_bytes;
  const std::uint64_t end = static_cast<std::uint64_t>(first + count) * row_bytes;
  const std::uint64_t lo = begin / kWindow * kWindow;
  const std::uint64_t hi = first + count == tensor.rows ? end : end / kWindow * kWindow;
  if (hi > lo) release_range(tensor.data + lo, hi - lo);
}

// Rows [first, first + count) of `tensors` stacked, as f32, for pack_weights_by_rows
// (which calls it from its threads); the file pages of rows converted are released as
// it goes.
RowSource stacked_rows(const Sources& tensors) {
  return [tensors](std::int64_t first, std::int64_t count, float* out) {
    for (std::int64_t i = 0; i < count; ++i) {
      std::int64_t row = first + i;
      std::size_t t = 0;
      while (row >= tensors[t]->rows) row -= tensors[t++]->rows;
      const auto columns = static_cast<std::size_t>(tensors[t]->columns);
      tensors[t]->row_to_f32(row, std::span<float>(out + i * columns, columns));
    }
    std::int64_t row = first, left = count;
    for (const TensorView* t : tensors) {
      if (row >= t->rows) {
        row -= t->rows;
        continue;
      }
      const std::int64_t here = std::min(left, t->rows - row);
      release_completed_windows(*t, row, here);
      left -= here;
      row = 0;
      if (left == 0) break;
    }
  };
}

bool is_dense(const TensorChoice& choice) {
  return choice.kind == TensorChoice::Kind::f32 || choice.kind == TensorChoice::Kind::bf16;
}

// What a tensor's role gets without a rule.
enum class Role { linear, classifier, embedding };

TensorChoice dense_choice(const Precision& p) {
  return {p.dense == DenseType::bf16 ? TensorChoice::Kind::bf16 : TensorChoice::Kind::f32, {}};
}

QuantScheme classifier_scheme(const Precision& p) {
  QuantScheme scheme = kPerChannelInt8;
  scheme.weight_only = p.scheme.weight_only;
  return scheme;
}

TensorChoice default_choice(const Precision& p, Role role) {
  if (!p.quantized)  // the embedding table of a dense model is f32 (a lookup, no matmul)
    return role == Role::embedding ? TensorChoice{TensorChoice::Kind::f32, {}} : dense_choice(p);
  // woq-native: the file's blocks on the weight-only kernels.
  QuantScheme native_scheme{};
  native_scheme.weight_only = p.scheme.weight_only;
  const TensorChoice native{TensorChoice::Kind::native, native_scheme};
  switch (role) {
    case Role::embedding:
      return p.native ? native : TensorChoice{TensorChoice::Kind::quantized, kPerChannelInt8};
    case Role::classifier:
      if (p.lm_head_dense) return dense_choice(p);
      // A native run keeps the file's classifier too, unless --lm-head int8 asks otherwise.
      // A weight-only run keeps the classifier weight-only too (woq-int8).
      return p.native && !p.lm_head_int8
                 ? native
                 : TensorChoice{TensorChoice::Kind::quantized, classifier_scheme(p)};
    case Role::linear:
      break;
  }
  return p.native ? native : TensorChoice{TensorChoice::Kind::quantized, p.scheme};
}

// The choice of every layer, decided (and checked) before any tensor is converted:
//
//   per tensor:  the last matching rule, else default_choice(role)
//   per layer:   its fused tensors' choices, which must agree
//   native:      kept for a Q8_0 / Q4_0 / Q4_1 / Q2_K / Q3_K / Q4_K / Q6_K tensor (a
//                fused layer's all of one type); otherwise the precision's scheme (int8
//                per-channel for the classifier and the embedding)
class PolicyPlanner {
 public:
  PolicyPlanner(const ModelFile& model, const Precision& precision)
      : model_(model), precision_(precision), used_(precision.rules.size(), false) {}

  // `row_stack`: the tensors' rows are stacked (q | k | v), so native runs of different
  // types can each keep their form.
  TensorChoice layer(const std::string& layer_name, const Sources& tensors, Role role,
                     bool row_stack = false) {
    TensorChoice choice;
    std::string first;
    for (const TensorView* t : tensors) {
      const std::string name = tensor_name(*t, role);
      // "native" is decided for the fused layer as a whole below (a Q4_K attn_q beside an
      // F32 attn_k is native for neither).
      TensorChoice here = tensor_choice(name, role);
      if (first.empty()) {
        first = name;
        choice = here;
      }
      QF_REQUIRE(here == choice, model_.path(), ": ", first, " gets ", to_string(choice), " but ",
                 name, " gets ", to_string(here), "; they are one fused layer (", layer_name,
                 "): give them the same scheme");
    }
    if (choice.kind == TensorChoice::Kind::native && !all_native(tensors, row_stack))
      choice = fallback(role);
    if (role == Role::embedding) check_embedding(choice);
    return choice;
  }

  // Every rule must decide at least one tensor.
  void check_every_rule_used() const {
    for (std::size_t i = 0; i < used_.size(); ++i)
      QF_REQUIRE(used_[i], precision_.rules[i].flag, ": the pattern '", precision_.rules[i].pattern,
                 "' names no tensor of ", model_.path(),
                 " (names: token_embd, blk.N.attn_q, attn_k, attn_v, attn_output, ffn_gate, "
                 "ffn_up, ffn_down, output)");
  }

 private:
  // A tied classifier is still "output" to the policy.
  static std::string tensor_name(const TensorView& t, Role role) {
    if (role == Role::classifier) return "output";
    std::string name = t.name;
    if (name.ends_with(".weight")) name.resize(name.size() - 7);
    return name;
  }

  TensorChoice tensor_choice(const std::string& name, Role role) {
    const TensorRule* rule = deciding_rule(precision_.rules, name);
    if (rule == nullptr) return default_choice(precision_, role);
    used_[static_cast<std::size_t>(rule - precision_.rules.data())] = true;
    return rule->choice;
  }

  // What "native" means for a tensor without a native form.
  TensorChoice fallback(Role role) const {
    if (role == Role::embedding) return {TensorChoice::Kind::quantized, kPerChannelInt8};
    return {TensorChoice::Kind::quantized,
            role == Role::linear ? precision_.scheme : classifier_scheme(precision_)};
  }

  void check_embedding(const TensorChoice& c) const {
    const bool ok =
        c.kind == TensorChoice::Kind::f32 || c.kind == TensorChoice::Kind::native ||
        (c.kind == TensorChoice::Kind::quantized && stored_form(c.scheme) == kPerChannelInt8);
    QF_REQUIRE(ok, model_.path(), ": token_embd cannot be ", to_string(c),
               "; the embedding table is f32, int8 (one scale per row) or native");
  }

  const ModelFile& model_;
  const Precision& precision_;
  std::vector<bool> used_;
};

// The prequantized forms (ModelFile::set_prequantized) of every one of `tensors` under
// `scheme`, stacked by rows; nullopt unless all of them have one.
std::optional<QuantizedTensor> stacked_prequantized(const ModelFile& model, const Sources& tensors,
                                                    const QuantScheme& scheme) {
  std::vector<const QuantizedTensor*> parts;
  for (const TensorView* t : tensors) {
    const QuantizedTensor* q = model.prequantized(t->name, scheme);
    if (q == nullptr) return std::nullopt;
    parts.push_back(q);
  }
  QuantizedTensor out = *parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const QuantizedTensor& p = *parts[i];
    QF_REQUIRE(p.k_padded == out.k_padded && p.group == out.group, model.path(), ": ",
               tensors[i]->name, " is prequantized with another geometry than ", tensors[0]->name);
    out.n += p.n;
    out.q.insert(out.q.end(), p.q.begin(), p.q.end());
    out.scales.insert(out.scales.end(), p.scales.begin(), p.scales.end());
    out.zero_points.insert(out.zero_points.end(), p.zero_points.begin(), p.zero_points.end());
    out.offsets.insert(out.offsets.end(), p.offsets.begin(), p.offsets.end());
  }
  return out;
}

ActivationKind activation_of(const QuantScheme& scheme) {
  return scheme.weight_only ? ActivationKind::f32 : ActivationKind::s8;
}

// A native layer's activations: weight-only (woq-native) where its kernels read the
// file's type; int5 (Q5_0 / Q5_1 / Q5_K) has W8A8 kernels only, so it quantizes its inputs.
ActivationKind native_activation(const TensorView& source, const TensorChoice& choice) {
  const std::optional<QuantScheme> stored = native_scheme(source);
  return stored && stored->bits == 5 ? ActivationKind::s8 : activation_of(choice.scheme);
}

class LayerBuilder {
 public:
  LayerBuilder(const ModelFile& model, int threads) : model_(model), threads_(threads) {}

  // A plain or residual layer whose rows are the rows of `tensors`, stacked. The
  // tensors' file pages are released once converted.
  std::unique_ptr<LinearLayer> linear(const Sources& tensors, LinearFusion fusion,
                                      const TensorChoice& choice) const {
    std::unique_ptr<LinearLayer> layer = convert(tensors, fusion, choice);
    for (const TensorView* t : tensors) release_pages(*t);
    return layer;
  }

  // The fused gate/up layer.
  std::unique_ptr<LinearLayer> swiglu(const TensorView& gate, const TensorView& up,
                                      const TensorChoice& choice) const {
    std::unique_ptr<LinearLayer> layer = convert_pair(gate, up, choice);
    release_pages(gate);
    release_pages(up);
    return layer;
  }

  // Frees the f32 conversion buffer.
  void release_scratch() const { std::vector<float>().swap(scratch_); }

 private:
  std::unique_ptr<LinearLayer> convert(const Sources& tensors, LinearFusion fusion,
                                       const TensorChoice& choice) const {
    const std::int64_t k = tensors[0]->columns;
    std::int64_t n = 0;
    for (const TensorView* t : tensors) n += t->rows;
    const QuantScheme& scheme = choice.scheme;
    if (choice.kind == TensorChoice::Kind::native ||
        (!is_dense(choice) && all_encoded_as(tensors, scheme))) {
      const std::vector<Sources> runs = native_runs(tensors);
      if (runs.size() == 1) return native_linear(tensors, fusion, choice);
      QF_REQUIRE(fusion == LinearFusion::plain, "native layer of ", tensors[0]->name,
                 ": tensors of different types stack only in a plain layer");
      std::vector<std::unique_ptr<LinearLayer>> parts;
      for (const Sources& run : runs) parts.push_back(native_linear(run, fusion, choice));
      return std::make_unique<RowStackedLinear>(std::move(parts));
    }
    if (!is_dense(choice))
      if (const auto prequantized = stacked_prequantized(model_, tensors, scheme))
        return std::make_unique<JitLinear>(pack_quantized(*prequantized, threads_), fusion,
                                           activation_of(scheme));
    if (!is_dense(choice) && scheme.granularity != Granularity::per_tensor)
      return std::make_unique<JitLinear>(
          pack_weights_by_rows(n, k, scheme, stacked_rows(tensors), threads_), fusion,
          activation_of(scheme));
    const std::vector<float>& w = stacked_f32(tensors, threads_, scratch_);
    if (is_dense(choice))
      return std::make_unique<DenseLinear>(w.data(), n, k, fusion,
                                           choice.kind == TensorChoice::Kind::bf16);
    return std::make_unique<JitLinear>(pack_weights(w.data(), n, k, scheme, threads_), fusion,
                                       activation_of(scheme));
  }

  // The file's blocks of `tensors` (one type), stacked and packed as they are.
  std::unique_ptr<LinearLayer> native_linear(const Sources& tensors, LinearFusion fusion,
                                             const TensorChoice& choice) const {
    std::int64_t n = 0;
    for (const TensorView* t : tensors) n += t->rows;
    return std::make_unique<JitLinear>(
        pack_operands_by_rows(n, tensors[0]->columns, *native_scheme(*tensors[0]),
                              native_operand_rows(tensors), threads_),
        fusion, native_activation(*tensors[0], choice));
  }

  std::unique_ptr<LinearLayer> convert_pair(const TensorView& gate, const TensorView& up,
                                            const TensorChoice& choice) const {
    const std::int64_t hidden = gate.rows, k = gate.columns;
    if (choice.kind == TensorChoice::Kind::native ||
        (!is_dense(choice) && all_encoded_as({&gate, &up}, choice.scheme))) {
      const TensorView* g[] = {&gate};
      const TensorView* u[] = {&up};
      return std::make_unique<JitLinear>(
          pack_operand_pair_by_rows(hidden, k, *native_scheme(gate), native_operand_rows(g),
                                    native_operand_rows(u), threads_),
          LinearFusion::swiglu, native_activation(gate, choice));
    }
    const QuantScheme& scheme = choice.scheme;
    if (!is_dense(choice)) {
      const auto g = stacked_prequantized(model_, {&gate}, scheme);
      const auto u = stacked_prequantized(model_, {&up}, scheme);
      if (g && u)
        return std::make_unique<JitLinear>(pack_quantized_pair(*g, *u, threads_),
                                           LinearFusion::swiglu, activation_of(scheme));
    }
    if (!is_dense(choice) && scheme.granularity != Granularity::per_tensor)
      return std::make_unique<JitLinear>(
          pack_swiglu_pair_by_rows(hidden, k, scheme, stacked_rows({&gate}), stacked_rows({&up}),
                                   threads_),
          LinearFusion::swiglu, activation_of(scheme));
    const std::vector<float>& gate_up = stacked_f32({&gate, &up}, threads_, scratch_);
    if (is_dense(choice))
      return std::make_unique<DenseLinear>(gate_up.data(), hidden, k, LinearFusion::swiglu,
                                           choice.kind == TensorChoice::Kind::bf16);
    const float* g = gate_up.data();
    return std::make_unique<JitLinear>(
        pack_swiglu_pair(g, g + hidden * k, hidden, k, scheme, threads_), LinearFusion::swiglu,
        activation_of(scheme));
  }

  const ModelFile& model_;
  int threads_;
  mutable std::vector<float> scratch_;  // f32 rows of the layer being converted
};

// How a layer's choice reads in the applied policy: the scheme, f32 / bf16, or the
// file's type for a native layer ("Q4_0").
// A prequantized layer adds its method ("int4-g128 gptq").
std::string describe(const TensorChoice& choice, const TensorView& source, const ModelFile& model,
                     const Sources& stacked = {}) {
  const std::string woq = choice.scheme.weight_only ? " woq" : "";
  if (source.encoded && (choice.kind == TensorChoice::Kind::native ||
                         (!is_dense(choice) && all_encoded_as({&source}, choice.scheme)))) {
    const std::string& method = source.encoded->method;
    return to_string(source.encoded->geometry.scheme) + woq + (method.empty() ? "" : " " + method) +
           " (file)";
  }
  if (choice.kind == TensorChoice::Kind::native) {
    const bool woq_kernels = native_activation(source, choice) == ActivationKind::f32;
    std::string types(ggml_type_name(source.type));
    for (const TensorView* t : stacked)  // a row stack of types: "Q4_K+Q6_K"
      if (types.find(ggml_type_name(t->type)) == std::string::npos)
        types += "+" + std::string(ggml_type_name(t->type));
    return types + (woq_kernels ? woq : "");
  }
  if (choice.kind == TensorChoice::Kind::quantized &&
      model.prequantized(source.name, choice.scheme))
    return to_string(choice) + " " + model.prequantized_method(source.name);
  return to_string(choice);
}

// Static W8A8 (ModelFile::set_activation_scale): the JIT layer `name` quantizes its
// inputs with the calibrated scale; the applied policy says so (" static-act"). A dense
// layer (the same file built in f32 as a reference) has no int8 inputs to scale.
std::string with_activation_scale(const ModelFile& model, const std::string& name,
                                  LinearLayer& layer, std::string description) {
  const float scale = model.activation_scale(name);
  auto* jit = dynamic_cast<JitLinear*>(&layer);
  // A weight-only layer keeps its inputs in f32: a file's scales do not apply to it.
  if (scale == 0.f || jit == nullptr || jit->quantized().weight_only()) return description;
  jit->set_static_activation_scale(scale);
  return description + " static-act";
}

struct LayerPlan {
  TensorChoice qkv, wo, gate_up, down;
};
struct ModelPlan {
  TensorChoice embedding;
  std::vector<LayerPlan> layers;
  TensorChoice classifier;
};

ModelPlan plan_model(const ModelFile& model, const Precision& precision) {
  PolicyPlanner planner(model, precision);
  ModelPlan plan;
  plan.embedding =
      planner.layer("token_embd", {&model.tensor("token_embd.weight")}, Role::embedding);
  for (int l = 0; l < model.config().n_layers; ++l) {
    const auto tensor = [&](const char* role) { return &model.layer_tensor(l, role); };
    const std::string prefix = "blk." + std::to_string(l) + ".";
    plan.layers.push_back(
        {planner.layer(prefix + "attn_qkv", {tensor("attn_q"), tensor("attn_k"), tensor("attn_v")},
                       Role::linear, /*row_stack=*/true),
         planner.layer(prefix + "attn_output", {tensor("attn_output")}, Role::linear),
         planner.layer(prefix + "ffn_gate_up", {tensor("ffn_gate"), tensor("ffn_up")},
                       Role::linear),
         planner.layer(prefix + "ffn_down", {tensor("ffn_down")}, Role::linear)});
  }
  plan.classifier = planner.layer("output", {&model.classifier()}, Role::classifier);
  planner.check_every_rule_used();
  return plan;
}

}  // namespace

Precision parse_precision(std::string_view quant, std::string_view lm_head) {
  Precision precision;
  if (quant == "f32" || quant == "bf16") {
    precision.quantized = false;
    precision.dense = quant == "bf16" ? DenseType::bf16 : DenseType::f32;
  } else if (quant.empty() || quant == "native" || quant == "woq-native") {
    precision.native = true;  // tensors without a native form get int8 per-channel
    precision.scheme.weight_only = quant == "woq-native";
  } else {
    try {
      precision.scheme = parse_quant_scheme(quant, "--quant");
    } catch (const Error& e) {
      fail(e.what(), "; or f32, bf16, native, woq-native");
    }
    validate(precision.scheme);
  }
  if (lm_head == "f32" || lm_head == "bf16") {
    if (precision.quantized) {
      precision.lm_head_dense = true;
      precision.dense = lm_head == "bf16" ? DenseType::bf16 : DenseType::f32;
    }
  } else {
    QF_REQUIRE(lm_head.empty() || lm_head == "int8", "--lm-head: '", lm_head,
               "' is not one of int8, f32, bf16");
    precision.lm_head_int8 = lm_head == "int8";
  }
  return precision;
}

std::string to_string(const Precision& precision) {
  const char* dense = precision.dense == DenseType::bf16 ? "bf16" : "f32";
  const std::string kv =
      precision.kv == KvType::f32 ? "" : std::string(", kv ") + to_string(precision.kv);
  if (!precision.quantized) return dense + kv;
  std::string out = precision.native
                        ? std::string(precision.scheme.weight_only ? "woq-" : "") +
                              "native (Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q2_K..Q6_K kept; else " +
                              to_string(precision.scheme) + ")"
                        : to_string(precision.scheme);
  if (precision.lm_head_dense) out += std::string(" (lm-head ") + dense + ")";
  return out + kv;
}

std::vector<GemmKey> LlamaWeights::warmup_keys() const {
  std::vector<GemmKey> keys;
  auto add = [&](const LinearLayer& layer) {
    for (const GemmKey& key : layer.warmup_keys()) keys.push_back(key);
  };
  for (const LayerWeights& layer : layers)
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down}) add(**linear);
  add(*classifier);
  return keys;
}

std::vector<std::pair<std::string, const LinearLayer*>> LlamaWeights::named_layers() const {
  std::vector<std::pair<std::string, const LinearLayer*>> out;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    out.emplace_back(prefix + "attn_qkv", layers[l].wqkv.get());
    out.emplace_back(prefix + "attn_output", layers[l].wo.get());
    out.emplace_back(prefix + "ffn_gate_up", layers[l].gate_up.get());
    out.emplace_back(prefix + "ffn_down", layers[l].down.get());
  }
  out.emplace_back("output", classifier.get());
  return out;
}

std::unique_ptr<LinearLayer>& LlamaWeights::linear_slot(std::string_view name) {
  if (name == "output") return classifier;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    if (!name.starts_with(prefix)) continue;
    const std::string_view role = name.substr(prefix.size());
    if (role == "attn_qkv") return layers[l].wqkv;
    if (role == "attn_output") return layers[l].wo;
    if (role == "ffn_gate_up") return layers[l].gate_up;
    if (role == "ffn_down") return layers[l].down;
  }
  fail("no linear layer named '", name, "'");
}

std::uint64_t LlamaWeights::weight_bytes() const {
  std::uint64_t bytes = embedding.bytes() + output_norm.size() * sizeof(float);
  for (const LayerWeights& layer : layers) {
    bytes +=
        (layer.attn_norm.size() + layer.ffn_norm.size() + layer.qkv_bias.size()) * sizeof(float);
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down})
      bytes += (*linear)->weight_bytes();
  }
  return bytes + classifier->weight_bytes();
}

std::uint64_t LlamaWeights::decode_bytes_per_token() const {
  return weight_bytes() - embedding.bytes() + embedding.row_bytes();
}

std::uint64_t LlamaWeights::linear_parameters() const {
  std::uint64_t params = 0;
  auto add = [&](const LinearLayer& l) {
    const std::uint64_t outputs = l.n() * (l.fusion() == LinearFusion::swiglu ? 2 : 1);
    params += outputs * std::uint64_t(l.k());
  };
  for (const LayerWeights& layer : layers)
    for (const auto* linear : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down}) add(**linear);
  add(*classifier);
  return params;
}

namespace {

// A token_embd in qforge's encoding, kept as the file holds it: int8 per-channel as the
// table's int8 form, any other scheme decoded to f32 rows.
EmbeddingTable encoded_embedding(const TensorView& embedding, int threads) {
  if (embedding.encoded->geometry.scheme != kPerChannelInt8)
    return EmbeddingTable(to_f32(embedding, threads), embedding.rows, embedding.columns, false);
  // The file's rows as packing reads them: int8 operands are q + 128, the table's form.
  const TensorView* sources[] = {&embedding};
  const std::int64_t rows = embedding.rows, dim = embedding.columns;
  const std::int64_t k_padded = embedding.encoded->geometry.k_padded;
  std::vector<std::uint8_t> operands(static_cast<std::size_t>(rows * dim)), row(k_padded);
  std::vector<float> scales(static_cast<std::size_t>(rows));
  const OperandRowSource source = native_operand_rows(sources);
  for (std::int64_t r = 0; r < rows; ++r) {
    GroupParams params;  // per-channel: one group per row
    source(r, 1, row.data(), &params);
    std::copy_n(row.data(), dim, operands.data() + r * dim);
    scales[static_cast<std::size_t>(r)] = params.scale;
  }
  return EmbeddingTable::int8_table(std::move(operands), std::move(scales), rows, dim);
}

}  // namespace

namespace {

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// What one linear layer will hold under `choice` (packed or dense), for messages.
std::uint64_t planned_layer_bytes(const Sources& tensors, const TensorChoice& choice, bool pair) {
  std::int64_t n = 0;
  std::uint64_t file_bytes = 0;
  for (const TensorView* t : tensors) {
    n += t->rows;
    file_bytes += t->byte_size;
  }
  const std::int64_t k = tensors[0]->columns;
  switch (choice.kind) {
    case TensorChoice::Kind::f32:
      return static_cast<std::uint64_t>(n * k) * 4;
    case TensorChoice::Kind::bf16:
      return static_cast<std::uint64_t>(n * k) * 2;
    case TensorChoice::Kind::native:
      return file_bytes;
    case TensorChoice::Kind::quantized:
      break;
  }
  const QuantScheme scheme = stored_form(choice.scheme);
  const PackedHeader header =
      pair ? make_packed_header(n / 2, k, scheme, true) : make_packed_header(n, k, scheme);
  return static_cast<std::uint64_t>(geometry_of(header).total_bytes);
}

// What the weights will hold under `plan`: the embedding table and the linear layers.
std::uint64_t planned_weight_bytes(const ModelFile& model, const ModelPlan& plan) {
  const LlamaConfig& c = model.config();
  const TensorView& embedding = model.tensor("token_embd.weight");
  const auto vd = static_cast<std::uint64_t>(c.vocab_size) * static_cast<std::uint64_t>(c.dim);
  std::uint64_t bytes = plan.embedding.kind == TensorChoice::Kind::f32 ? vd * 4
                        : plan.embedding.kind == TensorChoice::Kind::quantized
                            ? vd + 4 * vd / c.dim
                            : embedding.byte_size;
  for (int l = 0; l < c.n_layers; ++l) {
    const auto tensor = [&](const char* role) { return &model.layer_tensor(l, role); };
    const LayerPlan& p = plan.layers[static_cast<std::size_t>(l)];
    bytes +=
        planned_layer_bytes({tensor("attn_q"), tensor("attn_k"), tensor("attn_v")}, p.qkv, false);
    bytes += planned_layer_bytes({tensor("attn_output")}, p.wo, false);
    bytes += planned_layer_bytes({tensor("ffn_gate"), tensor("ffn_up")}, p.gate_up, true);
    bytes += planned_layer_bytes({tensor("ffn_down")}, p.down, false);
  }
  return bytes + planned_layer_bytes({&model.classifier()}, plan.classifier, false);
}

[[noreturn]] void fail_out_of_memory(const ModelFile& model, const ModelPlan& plan) {
  std::uint64_t file_bytes = 0;
  for (const TensorView& t : model.tensors()) file_bytes += t.byte_size;
  std::string needed = "an unknown amount";
  try {
    needed = mib(planned_weight_bytes(model, plan));
  } catch (const Error&) {
  }
  fail(model.path(), ": not enough memory to build the weights: they need ", needed,
       " under this policy (the file's tensors hold ", mib(file_bytes),
       "), and an allocation failed; free memory, raise the process's limit (ulimit -v), or "
       "choose a smaller scheme (--quant int4-g32)");
}

LlamaWeights build_weights(const ModelFile& model, const Precision& precision,
                           const ModelPlan& plan, int threads, const LoadProgress& progress) {
  const LlamaConfig& c = model.config();
  const TensorView& embedding = model.tensor("token_embd.weight");
  const TensorView& classifier = model.classifier();
  const TensorChoice& embedding_choice = plan.embedding;
  const TensorChoice& classifier_choice = plan.classifier;

  LlamaWeights out;
  out.config = c;
  out.precision = precision;
  // The embedding first: a quantized table keeps int8 rows, so the f32 copy goes now.
  if (embedding_choice.kind == TensorChoice::Kind::native && embedding.encoded)
    out.embedding = encoded_embedding(embedding, threads);
  else if (embedding_choice.kind == TensorChoice::Kind::native)
    out.embedding = EmbeddingTable::file_rows(
        embedding.type, std::span(embedding.data, embedding.byte_size), c.vocab_size, c.dim);
  else if (embedding_choice.kind == TensorChoice::Kind::quantized)
    out.embedding =
        EmbeddingTable::int8_from_rows(c.vocab_size, c.dim, stacked_rows({&embedding}), threads);
  else
    out.embedding = EmbeddingTable(to_f32(embedding, threads), c.vocab_size, c.dim, false);
  out.policy.emplace_back("token_embd", describe(embedding_choice, embedding, model));
  release_pages(embedding);
  out.output_norm = to_f32(model.tensor("output_norm.weight"));
  const LayerBuilder build(model, threads);
  for (int l = 0; l < c.n_layers; ++l) {
    const auto tensor = [&](const char* role) { return &model.layer_tensor(l, role); };
    const LayerPlan& p = plan.layers[static_cast<std::size_t>(l)];
    LayerWeights layer;
    layer.attn_norm = to_f32(*tensor("attn_norm"));
    layer.ffn_norm = to_f32(*tensor("ffn_norm"));
    if (c.qkv_bias) {
      for (const char* role : {"attn_q", "attn_k", "attn_v"}) {
        const std::vector<float> bias = to_f32(model.tensor(layer_bias_name(l, role)));
        layer.qkv_bias.insert(layer.qkv_bias.end(), bias.begin(), bias.end());
      }
    }
    layer.wqkv = build.linear({tensor("attn_q"), tensor("attn_k"), tensor("attn_v")},
                              LinearFusion::plain, p.qkv);
    layer.wo = build.linear({tensor("attn_output")}, LinearFusion::residual, p.wo);
    layer.gate_up = build.swiglu(*tensor("ffn_gate"), *tensor("ffn_up"), p.gate_up);
    layer.down = build.linear({tensor("ffn_down")}, LinearFusion::residual, p.down);
    const std::string prefix = "blk." + std::to_string(l) + ".";
    const auto add_policy = [&](const char* site, LinearLayer& linear, const TensorChoice& choice,
                                const char* first_tensor, const Sources& stacked = {}) {
      const std::string name = prefix + site;
      out.policy.emplace_back(
          name, with_activation_scale(model, name, linear,
                                      describe(choice, *tensor(first_tensor), model, stacked)));
    };
    add_policy("attn_qkv", *layer.wqkv, p.qkv, "attn_q",
               {tensor("attn_q"), tensor("attn_k"), tensor("attn_v")});
    add_policy("attn_output", *layer.wo, p.wo, "attn_output");
    add_policy("ffn_gate_up", *layer.gate_up, p.gate_up, "ffn_gate");
    add_policy("ffn_down", *layer.down, p.down, "ffn_down");
    for (const char* role :
         {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      release_pages(*tensor(role));
    out.layers.push_back(std::move(layer));
    if (progress) progress(l + 1, c.n_layers + 1);
  }
  build.release_scratch();
  out.classifier = build.linear({&classifier}, LinearFusion::plain, classifier_choice);
  out.policy.emplace_back("output",
                          with_activation_scale(model, "output", *out.classifier,
                                                describe(classifier_choice, classifier, model)));
  if (progress) progress(c.n_layers + 1, c.n_layers + 1);
  release_pages(embedding);
  return out;
}

}  // namespace

LlamaWeights build_llama_weights(const ModelFile& model, const Precision& precision, int threads,
                                 const LoadProgress& progress) {
  if (threads <= 0) threads = default_load_threads();
  // Every layer's choice first: a bad policy fails before anything is converted.
  const ModelPlan plan = plan_model(model, precision);
  try {
    LlamaWeights weights = build_weights(model, precision, plan, threads, progress);
    weights.place_packed_weights_in_one_arena();
    return weights;
  } catch (const std::bad_alloc&) {
    fail_out_of_memory(model, plan);
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) fail_out_of_memory(model, plan);
    throw;
  }
}

// Each layer's old buffer is freed as soon as it has been copied, so the peak is the model
// and one layer; the arena's pages are touched (and faulted in as huge pages) in order.
void LlamaWeights::place_packed_weights_in_one_arena() {
  std::vector<LinearLayer*> order;
  for (LayerWeights& layer : layers)
    for (auto* slot : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down})
      if (*slot) order.push_back(slot->get());
  if (classifier) order.push_back(classifier.get());
  std::uint64_t bytes = 0;
  for (const LinearLayer* layer : order) bytes += layer->packed_arena_bytes();
  if (bytes == 0) return;
  const auto arena = std::make_shared<HugePageArena>(static_cast<std::size_t>(bytes));
  for (LinearLayer* layer : order) layer->move_packed_into(arena);
}

std::vector<PlannedLayer> plan_linear_layers(const ModelFile& model, const Precision& precision) {
  const ModelPlan plan = plan_model(model, precision);
  std::vector<PlannedLayer> out;
  for (int l = 0; l < model.config().n_layers; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    const LayerPlan& p = plan.layers[static_cast<std::size_t>(l)];
    const auto names = [&](std::initializer_list<const char*> roles) {
      std::vector<std::string> v;
      for (const char* role : roles) v.push_back(layer_tensor_name(l, role));
      return v;
    };
    out.push_back({prefix + "attn_qkv", names({"attn_q", "attn_k", "attn_v"}), p.qkv});
    out.push_back({prefix + "attn_output", names({"attn_output"}), p.wo});
    out.push_back({prefix + "ffn_gate_up", names({"ffn_gate", "ffn_up"}), p.gate_up});
    out.push_back({prefix + "ffn_down", names({"ffn_down"}), p.down});
  }
  out.push_back({"output", {model.classifier().name}, plan.classifier});
  return out;
}

std::unique_ptr<LinearLayer> build_linear_layer(const ModelFile& model, const PlannedLayer& layer,
                                                int threads) {
  const LayerBuilder build(model, threads > 0 ? threads : default_load_threads());
  Sources sources;
  for (const std::string& name : layer.tensors) sources.push_back(&model.tensor(name));
  std::unique_ptr<LinearLayer> out;
  if (layer.name.ends_with("ffn_gate_up")) {
    QF_REQUIRE(sources.size() == 2, layer.name, ": expected the gate and up tensors");
    out = build.swiglu(*sources[0], *sources[1], layer.choice);
  } else {
    const bool residual = layer.name.ends_with("attn_output") || layer.name.ends_with("ffn_down");
    out = build.linear(sources, residual ? LinearFusion::residual : LinearFusion::plain,
                       layer.choice);
  }
  with_activation_scale(model, layer.name, *out, "");
  return out;
}

std::string policy_summary(const LlamaWeights& weights) {
  // kind -> choice -> the layers that have it, in first-seen order
  struct Use {
    std::string choice;
    std::vector<std::string> layers;
  };
  std::vector<std::pair<std::string, std::vector<Use>>> kinds;
  for (const auto& entry : weights.policy) {
    const auto& layer = entry.first;
    const auto& choice = entry.second;  // a plain reference: lambdas capture it (clang 14)
    const std::size_t dot = layer.starts_with("blk.") ? layer.find('.', 4) : std::string::npos;
    const std::string kind = dot == std::string::npos ? layer : layer.substr(dot + 1);
    const std::string block = dot == std::string::npos ? "" : layer.substr(0, dot);
    auto k =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& e) { return e.first == kind; });
    if (k == kinds.end()) k = kinds.insert(kinds.end(), {kind, {}});
    auto u = std::find_if(k->second.begin(), k->second.end(),
                          [&](const Use& e) { return e.choice == choice; });
    if (u == k->second.end()) u = k->second.insert(k->second.end(), {choice, {}});
    u->layers.push_back(block);
  }
  std::string out;
  for (const auto& [kind, uses] : kinds) {
    if (!out.empty()) out += ", ";
    out += kind;
    for (std::size_t i = 0; i < uses.size(); ++i) {
      const Use& use = uses[i];
      out += (i == 0 ? " " : " + ") + use.choice;
      if (use.layers.front().empty()) continue;  // not a per-block layer
      out += " x" + std::to_string(use.layers.size());
      // Name the blocks of a minority choice (at most 8).
      if (uses.size() > 1 && i > 0 && use.layers.size() <= 8) {
        out += " (";
        for (std::size_t j = 0; j < use.layers.size(); ++j) out += (j ? " " : "") + use.layers[j];
        out += ")";
      }
    }
  }
  return out;
}

}  // namespace qforge
