#include "model/runtime/quantized_gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/ggml_quants.h"
#include "model/format/ggml_repack.h"
#include "model/format/gguf_writer.h"
#include "model/format/qforge_encoding.h"
#include "ops/quant/pack.h"
#include "ops/quant/quantize_fast.h"

namespace qforge {
namespace {

bool is_policy_tensor(const std::string& name) {
  if (name == "token_embd.weight" || name == "output.weight") return true;
  for (const char* role :
       {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    if (name.starts_with("blk.") && name.ends_with(std::string(".") + role + ".weight"))
      return true;
  return false;
}

// The metadata the file starts from: a GGUF source's own, or for a llama2.c checkpoint
// what llama.cpp's converter writes (the file's stem as its name, the config's keys, the
// tokenizer's vocabulary).
std::vector<GgufKeyValue> source_metadata(const ModelFile& model, const Tokenizer* tokenizer) {
  if (model.gguf() != nullptr) return model.gguf()->metadata();
  std::vector<GgufKeyValue> out = llama_config_to_gguf(model.config());
  out.push_back(
      {"general.name", GgufValue::string(std::filesystem::path(model.path()).stem().string())});
  for (GgufKeyValue& kv : tokenizer->to_gguf()) out.push_back(std::move(kv));
  return out;
}

std::string without_weight(const std::string& name) {
  return name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
}

// Tensors the executor fuses into one layer: they must get one choice.
std::string fused_layer(const std::string& name) {
  for (const char* role : {"attn_q", "attn_k", "attn_v"})
    if (name.ends_with(std::string(".") + role))
      return name.substr(0, name.rfind('.')) + ".attn_qkv";
  for (const char* role : {"ffn_gate", "ffn_up"})
    if (name.ends_with(std::string(".") + role))
      return name.substr(0, name.rfind('.')) + ".ffn_gate_up";
  return name;
}

// Rows [first, first + count) of `t` quantized by `scheme` as `type` blocks; or, when the
// model holds the tensor prequantized under `scheme` (GPTQ), those values as they are.
void encode_rows(const TensorView& t, const QuantizedTensor* prequantized,
                 const QuantScheme& scheme, GgmlType type, std::uint64_t first, std::uint64_t count,
                 std::byte* out) {
  const auto k = static_cast<std::size_t>(t.columns);
  const std::size_t row_bytes = ggml_row_bytes(type, k);
  const int bits = scheme.bits;
  const bool asym = scheme.asymmetric;
  const int bias = operand_of(0, bits, asym);
  std::vector<float> row(k);
  std::uint8_t operands[kQuantBlockValues];
  for (std::uint64_t r = 0; r < count; ++r) {
    if (prequantized == nullptr) t.row_to_f32(static_cast<std::int64_t>(first + r), row);
    std::byte* block = out + r * row_bytes;
    for (std::size_t g = 0; g < k; g += kQuantBlockValues) {
      GroupParams params;
      if (prequantized != nullptr) {
        const std::size_t row_at = (first + r) * static_cast<std::size_t>(prequantized->k_padded);
        const std::size_t group_at =
            (first + r) * static_cast<std::size_t>(prequantized->groups()) + g / kQuantBlockValues;
        params.scale = prequantized->scales[group_at];
        params.zero_point = prequantized->zero_points[group_at];
        for (std::size_t i = 0; i < kQuantBlockValues; ++i)
          operands[i] = static_cast<std::uint8_t>(prequantized->q[row_at + g + i] + bias);
      } else {
        bool finite = true;
        params = choose_group_params_fast(row.data() + g, kQuantBlockValues, bits, asym, &finite);
        QF_REQUIRE(finite, t.name, ": row ", first + r,
                   " holds a value that is not finite near column ", g);
        quantize_operands_fast(row.data() + g, kQuantBlockValues, kQuantBlockValues, params, bits,
                               asym, bias, operands);
      }
      const std::uint16_t d = f32_to_f16(params.scale);
      std::memcpy(block, &d, 2);
      if (type == GgmlType::Q8_0) {
        for (std::size_t i = 0; i < kQuantBlockValues; ++i)
          block[2 + i] = static_cast<std::byte>(operands[i] - 128);  // q as int8
        block += kQ8_0BlockBytes;
        continue;
      }
      std::size_t at = 2;
      if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) {
        const std::uint16_t m = f32_to_f16(asymmetric_offset(params, bits));
        std::memcpy(block + 2, &m, 2);
        at = 4;
      }
      if (bits == 5) {  // Q5_0 / Q5_1: u32 qh, bit i = operand i's fifth bit
        std::uint32_t qh = 0;
        for (std::uint32_t i = 0; i < kQuantBlockValues; ++i)
          qh |= static_cast<std::uint32_t>(operands[i] >> 4 & 1) << i;
        std::memcpy(block + at, &qh, 4);
        at += 4;
      }
      // byte j = nibble[j] | nibble[j + 16] << 4: the operands' low 4 bits are the nibbles
      for (std::size_t j = 0; j < 16; ++j)
        block[at + j] = static_cast<std::byte>((operands[j] & 15) | (operands[j + 16] & 15) << 4);
      block += at + 16;
    }
  }
}

// A tensor written in qforge's encoding (model/qforge_encoding.h): its geometry, the
// one set of params of a per-tensor scheme (over its fused layer, as a load computes
// them), and each group's params as the operand rows were made, which the scale and
// zero parts (written after them) read.
struct EncodedPlan {
  EncodedGeometry geometry;
  GroupParams tensor_params;
  std::vector<GroupParams> params;  // n x groups
};

// Operand rows [first, first + count) of `t` under the plan: the encoded source's bytes
// (native), the prequantized values (GPTQ), or quantized as packing does
// (ops/quant/pack.cpp: each group's params from its own values, padding quantized as 0).
void encode_operand_rows(const TensorView& t, bool copy_encoded,
                         const QuantizedTensor* prequantized, EncodedPlan& plan,
                         std::uint64_t first, std::uint64_t count, std::byte* out) {
  const EncodedGeometry& g = plan.geometry;
  const int bits = g.scheme.bits;
  const bool asym = g.scheme.asymmetric;
  const bool per_tensor = g.scheme.granularity == Granularity::per_tensor;
  const int bias = operand_of(0, bits, asym);
  std::vector<float> row(static_cast<std::size_t>(g.k));
  std::vector<std::uint8_t> operands(static_cast<std::size_t>(g.k_padded));
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto r = static_cast<std::int64_t>(first + i);
    GroupParams* params = plan.params.data() + r * g.groups();
    std::byte* dst = out + i * g.row_bytes();
    if (copy_encoded) {  // a file already in this encoding: its rows as they are
      const EncodedTensor& e = *t.encoded;
      std::memcpy(dst, e.operands + static_cast<std::uint64_t>(r) * g.row_bytes(), g.row_bytes());
      for (std::int64_t j = 0; j < g.groups(); ++j) {
        const std::uint64_t at = static_cast<std::uint64_t>(r * g.groups() + j);
        std::memcpy(&params[j].scale, e.scales + at * sizeof(float), sizeof(float));
        params[j].zero_point = asym ? std::to_integer<int>(e.zeros[at]) : 0;
      }
      continue;
    }
    if (prequantized != nullptr) {
      for (std::int64_t c = 0; c < g.k_padded; ++c)
        operands[static_cast<std::size_t>(c)] = static_cast<std::uint8_t>(
            operand_of(prequantized->q[static_cast<std::size_t>(r * g.k_padded + c)], bits, asym));
      for (std::int64_t j = 0; j < g.groups(); ++j) {
        const auto at = static_cast<std::size_t>(r * g.groups() + j);
        params[j] = {prequantized->scales[at], prequantized->zero_points[at], 0.f};
      }
    } else {
      t.row_to_f32(r, row);
      for (std::int64_t j = 0; j < g.groups(); ++j) {
        const std::int64_t k0 = j * g.group, values = std::min(g.group, g.k - k0);
        bool finite = true;
        params[j] = per_tensor
                        ? plan.tensor_params
                        : choose_group_params_fast(row.data() + k0, values, bits, asym, &finite);
        // (A per-tensor scheme's values were all checked by tensor_params.)
        QF_REQUIRE(finite, t.name, ": row ", r, " holds a value that is not finite near column ",
                   k0);
        quantize_operands_fast(row.data() + k0, values, g.group, params[j], bits, asym, bias,
                               operands.data() + k0);
      }
    }
    encode_operand_row(operands.data(), g, dst);
  }
}

// The min and max (with 0) of every value of `tensors`: a per-tensor scheme's range.
GroupParams tensor_params(const std::vector<const TensorView*>& tensors, const QuantScheme& s) {
  float lo = 0.f, hi = 0.f;
  for (const TensorView* t : tensors) {
    std::vector<float> row(static_cast<std::size_t>(t->columns));
    for (std::int64_t r = 0; r < t->rows; ++r) {
      t->row_to_f32(r, row);
      for (float v : row) {
        QF_REQUIRE(std::isfinite(v), t->name, ": row ", r, " holds a value that is not finite");
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  return group_params_from_range(lo, hi, s.bits, s.asymmetric);
}

std::uint32_t file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::Q4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::Q4_1:
      return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case GgmlType::Q5_0:
      return 8;  // LLAMA_FTYPE_MOSTLY_Q5_0
    case GgmlType::Q5_1:
      return 9;  // LLAMA_FTYPE_MOSTLY_Q5_1
    case GgmlType::BF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      return 0;  // LLAMA_FTYPE_ALL_F32
  }
}

}  // namespace

std::optional<GgmlType> ggml_type_of(const QuantScheme& s) {
  if (s.granularity != Granularity::per_group || s.group != 32 || s.two_level())
    return std::nullopt;
  if (s.bits == 8) return s.asymmetric ? std::nullopt : std::optional(GgmlType::Q8_0);
  if (s.bits == 5) return s.asymmetric ? GgmlType::Q5_1 : GgmlType::Q5_0;
  return s.asymmetric ? GgmlType::Q4_1 : GgmlType::Q4_0;
}

void require_quantized_gguf_source(const ModelFile& model, const Precision& precision,
                                   const Tokenizer* tokenizer) {
  QF_REQUIRE(model.gguf() != nullptr || tokenizer != nullptr, model.path(),
             ": a llama2.c checkpoint is written with its tokenizer's vocabulary, and none was "
             "given");
  QF_REQUIRE(precision.quantized,
             "quantize -o: --quant f32 / bf16 writes no quantized tensor; "
             "keep tensors with --keep instead");
}

QuantizedFile write_quantized_gguf(const ModelFile& model, const Precision& precision,
                                   const std::string& path,
                                   const std::function<void(std::size_t, std::size_t)>& progress,
                                   const Tokenizer* tokenizer) {
  require_quantized_gguf_source(model, precision, tokenizer);
  const GgufReader* source = model.gguf();
  // Every tensor's choice first: nothing is written when one is refused.
  struct Plan {
    const TensorView* tensor;
    TensorChoice choice;
    GgmlType type;
  };
  std::vector<Plan> plan;
  std::vector<bool> used(precision.rules.size(), false);
  std::map<std::string, std::pair<std::string, TensorChoice>> fused;  // layer -> first tensor
  const TensorChoice scheme_choice{TensorChoice::Kind::quantized, precision.scheme};
  for (const TensorView& t : model.tensors()) {
    if (!is_policy_tensor(t.name)) {
      plan.push_back({&t, {TensorChoice::Kind::native, {}}, t.type});  // copied
      continue;
    }
    const std::string name = without_weight(t.name);
    TensorChoice choice = precision.native && native_scheme(t)
                              ? TensorChoice{TensorChoice::Kind::native, {}}
                              : scheme_choice;
    if (const TensorRule* rule = deciding_rule(precision.rules, name)) {
      used[static_cast<std::size_t>(rule - precision.rules.data())] = true;
      choice = rule->choice;
    }
    if (choice.kind == TensorChoice::Kind::native && !native_scheme(t)) choice = scheme_choice;
    // A tensor already in qforge's encoding stays in it (its values as they are).
    if (choice.kind == TensorChoice::Kind::native && t.encoded)
      choice = {TensorChoice::Kind::quantized, t.encoded->geometry.scheme};
    const auto [it, first] = fused.try_emplace(fused_layer(name), name, choice);
    QF_REQUIRE(first || it->second.second == choice, path, ": ", it->second.first, " gets ",
               to_string(it->second.second), " but ", name, " gets ", to_string(choice),
               "; they run as one fused layer (", it->first, "): give them the same scheme");
    GgmlType type = t.type;
    switch (choice.kind) {
      case TensorChoice::Kind::f32:
        type = GgmlType::F32;
        break;
      case TensorChoice::Kind::bf16:
        type = GgmlType::BF16;
        break;
      case TensorChoice::Kind::native:
        break;
      case TensorChoice::Kind::quantized: {
        QF_REQUIRE(!choice.scheme.two_level(), path, ": ", name, " gets ", to_string(choice.scheme),
                   ", two-level scales, which only a K-quant file's tensors hold (kept with "
                   "--quant native); quantize -o writes one-level schemes");
        const std::optional<GgmlType> ggml = ggml_type_of(choice.scheme);
        if (!ggml) {  // qforge's encoding: operand rows + scale (+ zero) parts
          type = GgmlType::I8;
          break;
        }
        if (t.columns % 32 != 0) {  // no whole blocks: the tensor stays as it is
          choice = {TensorChoice::Kind::native, {}};
          break;
        }
        type = *ggml;
        break;
      }
    }
    plan.push_back({&t, choice, type});
  }
  for (std::size_t i = 0; i < used.size(); ++i)
    QF_REQUIRE(used[i], precision.rules[i].flag, ": the pattern '", precision.rules[i].pattern,
               "' names no tensor of ", model.path());

  GgufWriter writer(source != nullptr ? source->alignment() : kGgufDefaultAlignment);
  GgmlType main_type = GgmlType::F32;
  for (const Plan& p : plan)
    if (p.choice.kind == TensorChoice::Kind::quantized && p.type != GgmlType::I8)
      main_type = p.type;
  bool any_encoded = false;
  for (const Plan& p : plan) any_encoded = any_encoded || p.type == GgmlType::I8;
  for (const GgufKeyValue& kv : source_metadata(model, tokenizer)) {
    if (kv.key == "general.alignment" || kv.key == "general.file_type" ||
        kv.key.starts_with("qforge.quantize.") || kv.key.starts_with(kActivationScaleKey) ||
        kv.key.starts_with(kQforgeEncodedKey) || kv.key == kQforgeEncodingVersionKey)
      continue;
    writer.add(kv.key, kv.value);
  }
  // Static W8A8 scales (the model's: this file's own or calibrated now).
  for (const auto& [layer, scale] : model.activation_scales())
    writer.add(std::string(kActivationScaleKey) + layer, GgufValue::f32(scale));
  writer.add("general.file_type", GgufValue::u32(file_type_of(main_type)));
  writer.add("qforge.quantize.quant", GgufValue::string(to_string(precision.scheme)));
  writer.add("qforge.quantize.rules", GgufValue::string(rules_as_flags(precision.rules)));
  if (any_encoded)
    writer.add(std::string(kQforgeEncodingVersionKey), GgufValue::u32(kQforgeEncodingVersion));

  QuantizedFile out;
  std::vector<std::unique_ptr<EncodedPlan>> encoded_plans;  // live until the file is written
  for (const Plan& p : plan) {
    const TensorView& t = *p.tensor;
    std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(t.columns)};
    if (t.rows > 1 || is_policy_tensor(t.name)) dims.push_back(static_cast<std::uint64_t>(t.rows));
    QuantizedFileTensor record{
        t.name, p.type, "copied", t.byte_size,
        ggml_row_bytes(p.type, t.columns) * static_cast<std::uint64_t>(t.rows)};
    if (is_policy_tensor(t.name))
      record.choice = p.choice.kind != TensorChoice::Kind::native ? to_string(p.choice)
                      : native_scheme(t)
                          ? "native"
                          : "kept (" + std::to_string(t.columns) + " columns: not blocks of 32)";
    if (p.type == GgmlType::I8) {
      const QuantScheme scheme = stored_form(p.choice.scheme);
      const QuantizedTensor* prequantized = model.prequantized(t.name, p.choice.scheme);
      std::string method = prequantized != nullptr ? model.prequantized_method(t.name) : "";
      if (t.encoded && t.encoded->geometry.scheme == scheme) {
        if (!t.encoded->method.empty()) method = t.encoded->method;
        record.choice += " (file)";
      }
      if (!method.empty()) record.choice += " " + method;
      auto plan_ptr = std::make_unique<EncodedPlan>();
      EncodedPlan& e = *plan_ptr;
      encoded_plans.push_back(std::move(plan_ptr));
      e.geometry = encoded_geometry(t.rows, t.columns, scheme);
      e.params.resize(static_cast<std::size_t>(t.rows * e.geometry.groups()));
      const bool reuse = t.encoded && t.encoded->geometry.scheme == scheme;
      if (scheme.granularity == Granularity::per_tensor && prequantized == nullptr && !reuse) {
        // One scale over the fused layer, as a load stacks it: q | k | v together.
        std::vector<const TensorView*> members = {&t};
        if (fused_layer(without_weight(t.name)).ends_with(".attn_qkv")) {
          members.clear();
          const std::string prefix = t.name.substr(0, t.name.find(".attn_"));
          for (const char* role : {"attn_q", "attn_k", "attn_v"})
            members.push_back(&model.tensor(prefix + "." + role + ".weight"));
        }
        e.tensor_params = tensor_params(members, scheme);
      }
      const EncodedGeometry& g = e.geometry;
      QF_REQUIRE(prequantized == nullptr ||
                     (prequantized->k_padded == g.k_padded && prequantized->group == g.group),
                 t.name, ": its ", method, " quantization has another geometry than ",
                 to_string(scheme));
      writer.add(encoded_key(t.name, "scheme"), GgufValue::string(to_string(scheme)));
      writer.add(encoded_key(t.name, "columns"), GgufValue::u64(static_cast<std::uint64_t>(g.k)));
      if (!method.empty()) writer.add(encoded_key(t.name, "method"), GgufValue::string(method));
      const std::uint64_t rows = static_cast<std::uint64_t>(t.rows);
      const std::uint64_t groups = static_cast<std::uint64_t>(g.groups());
      writer.add_tensor_encoded(t.name, GgmlType::I8, {g.row_bytes(), rows},
                                [&t, reuse, prequantized, &e](
                                    std::uint64_t first, std::uint64_t count, std::byte* bytes) {
                                  encode_operand_rows(t, reuse, prequantized, e, first, count,
                                                      bytes);
                                });
      writer.add_tensor_encoded(
          encoded_scale_name(t.name), GgmlType::F32, {groups, rows},
          [&e](std::uint64_t first, std::uint64_t count, std::byte* bytes) {
            const GroupParams* p = e.params.data() + first * e.geometry.groups();
            for (std::uint64_t i = 0; i < count * e.geometry.groups(); ++i)
              std::memcpy(bytes + i * sizeof(float), &p[i].scale, sizeof(float));
          });
      if (scheme.asymmetric)
        writer.add_tensor_encoded(encoded_zero_name(t.name), GgmlType::I8, {groups, rows},
                                  [&e](std::uint64_t first, std::uint64_t count, std::byte* bytes) {
                                    const GroupParams* p =
                                        e.params.data() + first * e.geometry.groups();
                                    for (std::uint64_t i = 0; i < count * e.geometry.groups(); ++i)
                                      bytes[i] = static_cast<std::byte>(p[i].zero_point);
                                  });
      record.bytes =
          rows * (g.row_bytes() + groups * (sizeof(float) + (scheme.asymmetric ? 1 : 0)));
    } else if (p.choice.kind == TensorChoice::Kind::quantized) {
      const QuantScheme scheme = p.choice.scheme;
      const GgmlType type = p.type;
      const QuantizedTensor* prequantized = model.prequantized(t.name, scheme);
      if (prequantized != nullptr) record.choice += " " + model.prequantized_method(t.name);
      writer.add_tensor_encoded(t.name, type, dims,
                                [&t, prequantized, scheme, type](
                                    std::uint64_t first, std::uint64_t count, std::byte* bytes) {
                                  encode_rows(t, prequantized, scheme, type, first, count, bytes);
                                });
    } else if (p.type == t.type) {  // native, or a tensor outside the policy: the bytes
      writer.add_tensor_encoded(
          t.name, t.type, dims, [&t](std::uint64_t first, std::uint64_t count, std::byte* bytes) {
            std::memcpy(bytes, t.data + first * t.row_bytes(), count * t.row_bytes());
          });
    } else {  // kept f32 / bf16
      writer.add_tensor_streamed(
          t.name, p.type, dims, [&t](std::uint64_t first, std::uint64_t count, float* values) {
            for (std::uint64_t r = 0; r < count; ++r)
              t.row_to_f32(
                  static_cast<std::int64_t>(first + r),
                  std::span<float>(values + r * t.columns, static_cast<std::size_t>(t.columns)));
          });
    }
    out.source_bytes += record.source_bytes;
    out.bytes += record.bytes;
    out.tensors.push_back(record);
  }
  if (progress) writer.set_progress(progress);
  writer.write(path);
  return out;
}

}  // namespace qforge
