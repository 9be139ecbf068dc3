#include "model/quantized_gguf.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/ggml_quants.h"
#include "model/ggml_repack.h"
#include "model/gguf_writer.h"
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
      if (type == GgmlType::Q4_1) {
        const std::uint16_t m = f32_to_f16(asymmetric_offset(params, 4));
        std::memcpy(block + 2, &m, 2);
        at = 4;
      }
      // byte j = nibble[j] | nibble[j + 16] << 4; the int4 operands are the nibbles
      for (std::size_t j = 0; j < 16; ++j)
        block[at + j] = static_cast<std::byte>(operands[j] | operands[j + 16] << 4);
      block += at + 16;
    }
  }
}

std::uint32_t file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q8_0:
      return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    case GgmlType::Q4_0:
      return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::Q4_1:
      return 3;  // LLAMA_FTYPE_MOSTLY_Q4_1
    case GgmlType::BF16:
      return 32;  // LLAMA_FTYPE_MOSTLY_BF16
    default:
      return 0;  // LLAMA_FTYPE_ALL_F32
  }
}

}  // namespace

std::optional<GgmlType> ggml_type_of(const QuantScheme& s) {
  if (s.granularity != Granularity::per_group || s.group != 32) return std::nullopt;
  if (s.bits == 8) return s.asymmetric ? std::nullopt : std::optional(GgmlType::Q8_0);
  return s.asymmetric ? GgmlType::Q4_1 : GgmlType::Q4_0;
}

QuantizedFile write_quantized_gguf(const ModelFile& model, const Precision& precision,
                                   const std::string& path,
                                   const std::function<void(std::size_t, std::size_t)>& progress) {
  const GgufReader* source = model.gguf();
  QF_REQUIRE(source != nullptr, model.path(),
             ": quantize -o writes GGUF from a GGUF model (a llama2.c checkpoint carries no "
             "GGUF metadata to keep)");
  QF_REQUIRE(precision.quantized,
             "quantize -o: --quant f32 / bf16 writes no quantized tensor; "
             "keep tensors with --keep instead");
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
    TensorChoice choice = precision.native && native_scheme(t.type)
                              ? TensorChoice{TensorChoice::Kind::native, {}}
                              : scheme_choice;
    if (const TensorRule* rule = deciding_rule(precision.rules, name)) {
      used[static_cast<std::size_t>(rule - precision.rules.data())] = true;
      choice = rule->choice;
    }
    if (choice.kind == TensorChoice::Kind::native && !native_scheme(t.type)) choice = scheme_choice;
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
        const std::optional<GgmlType> ggml = ggml_type_of(choice.scheme);
        QF_REQUIRE(ggml.has_value(), name, ": ", to_string(choice.scheme),
                   " has no ggml type; quantize -o writes int8-g32 (Q8_0), int4-g32 (Q4_0), "
                   "int4-g32-asym (Q4_1), f32, bf16 and native tensors (the qforge encoding of "
                   "other schemes is not written yet)");
        if (t.columns % 32 != 0) {  // as llama-quantize does: the tensor stays as it is
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

  GgufWriter writer(source->alignment());
  GgmlType main_type = GgmlType::F32;
  for (const Plan& p : plan)
    if (p.choice.kind == TensorChoice::Kind::quantized) main_type = p.type;
  for (const GgufKeyValue& kv : source->metadata()) {
    if (kv.key == "general.alignment" || kv.key == "general.file_type" ||
        kv.key.starts_with("qforge.quantize.") || kv.key.starts_with(kActivationScaleKey))
      continue;
    writer.add(kv.key, kv.value);
  }
  // Static W8A8 scales (the model's: this file's own or calibrated now).
  for (const auto& [layer, scale] : model.activation_scales())
    writer.add(std::string(kActivationScaleKey) + layer, GgufValue::f32(scale));
  writer.add("general.file_type", GgufValue::u32(file_type_of(main_type)));
  writer.add("qforge.quantize.quant", GgufValue::string(to_string(precision.scheme)));
  writer.add("qforge.quantize.rules", GgufValue::string(rules_as_flags(precision.rules)));

  QuantizedFile out;
  for (const Plan& p : plan) {
    const TensorView& t = *p.tensor;
    std::vector<std::uint64_t> dims = {static_cast<std::uint64_t>(t.columns)};
    if (t.rows > 1 || is_policy_tensor(t.name)) dims.push_back(static_cast<std::uint64_t>(t.rows));
    QuantizedFileTensor record{
        t.name, p.type, "copied", t.byte_size,
        ggml_row_bytes(p.type, t.columns) * static_cast<std::uint64_t>(t.rows)};
    if (is_policy_tensor(t.name))
      record.choice = p.choice.kind != TensorChoice::Kind::native ? to_string(p.choice)
                      : native_scheme(t.type)
                          ? "native"
                          : "kept (" + std::to_string(t.columns) + " columns: not blocks of 32)";
    if (p.choice.kind == TensorChoice::Kind::quantized) {
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
