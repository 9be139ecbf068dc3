#include "model/runtime/tensor_policy.h"

#include "jit/base/error.h"

namespace qforge {
namespace {

std::string_view without_weight_suffix(std::string_view name) {
  constexpr std::string_view kSuffix = ".weight";
  if (name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix)
    name.remove_suffix(kSuffix.size());
  return name;
}

// Iterative glob with one backtrack point (the last '*'): linear in practice.
bool glob(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0, star = std::string_view::npos, resume = 0;
  while (si < s.size()) {
    if (pi < p.size() && (p[pi] == '?' || p[pi] == s[si])) {
      ++pi;
      ++si;
    } else if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      resume = si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++resume;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

// Splits "PATTERN=VALUE" at its last '='.
std::pair<std::string_view, std::string_view> split_rule(std::string_view text,
                                                         std::string_view flag, bool need_value) {
  const std::size_t eq = text.rfind('=');
  if (eq == std::string_view::npos) {
    QF_REQUIRE(!need_value, flag, ": '", text, "' is not PATTERN=SCHEME");
    return {text, {}};
  }
  const std::string_view pattern = text.substr(0, eq), value = text.substr(eq + 1);
  QF_REQUIRE(!pattern.empty(), flag, ": '", text, "' has no tensor pattern before '='");
  QF_REQUIRE(!value.empty(), flag, ": '", text, "' has no scheme after '='");
  return {pattern, value};
}

TensorRule make_rule(std::string_view pattern, std::string_view value, std::string flag) {
  TensorRule rule;
  rule.pattern = std::string(without_weight_suffix(pattern));
  rule.choice = parse_tensor_choice(value, flag);
  rule.flag = std::move(flag);
  return rule;
}

}  // namespace

TensorChoice parse_tensor_choice(std::string_view text, std::string_view where) {
  TensorChoice choice;
  if (text == "f32") {
    choice.kind = TensorChoice::Kind::f32;
  } else if (text == "bf16") {
    choice.kind = TensorChoice::Kind::bf16;
  } else if (text == "native") {
    choice.kind = TensorChoice::Kind::native;
  } else {
    try {
      choice.scheme = parse_quant_scheme(text, where);
    } catch (const Error& e) {
      fail(e.what(), "; or f32, bf16, native");
    }
  }
  return choice;
}

std::string to_string(const TensorChoice& choice) {
  switch (choice.kind) {
    case TensorChoice::Kind::f32:
      return "f32";
    case TensorChoice::Kind::bf16:
      return "bf16";
    case TensorChoice::Kind::native:
      return "native";
    case TensorChoice::Kind::quantized:
      break;
  }
  return to_string(choice.scheme);
}

TensorRule parse_tensor_type_rule(std::string_view text) {
  const auto [pattern, value] = split_rule(text, "--tensor-type", /*need_value=*/true);
  return make_rule(pattern, value, "--tensor-type " + std::string(text));
}

TensorRule parse_keep_rule(std::string_view text) {
  auto [pattern, value] = split_rule(text, "--keep", /*need_value=*/false);
  if (value.empty()) value = "f32";
  QF_REQUIRE(value == "f32" || value == "bf16", "--keep: '", text,
             "' keeps a tensor f32 or bf16 only (use --tensor-type for a scheme)");
  return make_rule(pattern, value, "--keep " + std::string(text));
}

std::string preset_names() {
  return "keep-ends | keep-ends-bf16 | down-int8";
}

std::vector<TensorRule> preset_rules(std::string_view name) {
  const std::string flag = "--preset " + std::string(name);
  auto rule = [&](std::string_view pattern, std::string_view value) {
    return make_rule(pattern, value, flag);
  };
  // The embedding and the classifier high precision (norms are always f32), the
  // attention and FFN projections at --quant.
  if (name == "keep-ends") return {rule("token_embd", "f32"), rule("output", "f32")};
  if (name == "keep-ends-bf16") return {rule("token_embd", "f32"), rule("output", "bf16")};
  // The down projections (the widest activation outliers) int8 per-channel.
  if (name == "down-int8") return {rule("blk.*.ffn_down", "int8")};
  fail("--preset: unknown preset '", name, "' (", preset_names(), ")");
}

bool tensor_pattern_matches(std::string_view pattern, std::string_view name) {
  return glob(without_weight_suffix(pattern), without_weight_suffix(name));
}

const TensorRule* deciding_rule(const std::vector<TensorRule>& rules, std::string_view name) {
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    if (tensor_pattern_matches(it->pattern, name)) return &*it;
  return nullptr;
}

std::string rules_as_flags(const std::vector<TensorRule>& rules) {
  std::string out;
  for (const TensorRule& r : rules) {
    if (!out.empty()) out += ' ';
    const bool keep = r.choice.kind == TensorChoice::Kind::f32;
    out += keep ? "--keep " + r.pattern : "--tensor-type " + r.pattern + "=" + to_string(r.choice);
  }
  return out;
}

}  // namespace qforge
