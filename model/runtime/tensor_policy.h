// Which precision each weight tensor of a model gets: the mixed-precision policy.
//
//   rules, in order (preset rules first, then each --tensor-type / --keep flag)
//        "blk.*.ffn_down=int8"   "output=bf16"   "token_embd=f32"   "blk.3.*=f32"
//   tensor name (GGUF, without ".weight")  ->  the last rule whose glob matches it,
//                                               else the precision's default
//
// The tensors a policy decides are the linear ones (blk.N.attn_q/k/v, attn_output,
// ffn_gate/up, ffn_down, output) and the token embedding; norms are always f32. Tensors
// the executor fuses into one layer (q|k|v, gate|up) must get the same choice.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ops/quant/scheme.h"

namespace qforge {

// What one tensor is stored as.
struct TensorChoice {
  enum class Kind : std::uint8_t {
    quantized,  // `scheme`, through the JIT kernels
    native,     // a Q8_0 / Q4_0 / Q4_1 tensor kept as the file holds it
    f32,        // dense through oneDNN
    bf16,       // dense through oneDNN, bf16 weights
  };
  Kind kind = Kind::quantized;
  QuantScheme scheme;  // kind == quantized

  bool operator==(const TensorChoice&) const = default;
};

// "f32" | "bf16" | "native" | a scheme name (ops/quant/scheme.h). Throws qforge::Error
// naming `where`.
TensorChoice parse_tensor_choice(std::string_view text, std::string_view where);
std::string to_string(const TensorChoice& choice);

struct TensorRule {
  std::string pattern;  // glob: * any run of characters, ? one character
  TensorChoice choice;
  std::string flag;  // as the user wrote it, for messages: "--tensor-type blk.*.ffn_down=int8"
};

// "--tensor-type PATTERN=SCHEME".
TensorRule parse_tensor_type_rule(std::string_view text);
// "--keep PATTERN" (f32) or "--keep PATTERN=bf16" / "=f32".
TensorRule parse_keep_rule(std::string_view text);
// The rules of a named preset (preset_names() lists them); throws on an unknown name.
std::vector<TensorRule> preset_rules(std::string_view name);
std::string preset_names();  // "keep-ends | keep-ends-bf16 | down-int8"

// Glob match of `pattern` against `name`; a trailing ".weight" on either is ignored.
bool tensor_pattern_matches(std::string_view pattern, std::string_view name);

// The rule deciding `name` (the last that matches), or nullptr.
const TensorRule* deciding_rule(const std::vector<TensorRule>& rules, std::string_view name);

// The flags that reproduce `rules` ("--tensor-type blk.3.ffn_down=int8 --keep output").
std::string rules_as_flags(const std::vector<TensorRule>& rules);

}  // namespace qforge
