#include "ops/quant/scheme.h"

#include <charconv>

#include "jit/base/error.h"

namespace qforge {

void validate(const QuantScheme& s) {
  QF_REQUIRE(s.bits == 8 || s.bits == 5 || s.bits == 4,
             "quant scheme: bits must be 8, 5 or 4, got ", s.bits);
  QF_REQUIRE(!(s.bits == 5 && s.weight_only),
             "quant scheme: weight-only kernels read int8 and int4 weights, not int5");
  if (s.granularity != Granularity::per_group) {
    QF_REQUIRE(s.group == 0, "quant scheme: a group size is only meaningful per-group");
    QF_REQUIRE(s.superblock == 0, "quant scheme: a super-block is only meaningful per-group");
    return;
  }
  QF_REQUIRE(s.group >= 4 && s.group % 4 == 0,
             "quant scheme: group size must be a positive multiple of 4, got ", s.group);
  QF_REQUIRE(s.bits == 8 || s.group % 8 == 0,
             "quant scheme: int4 groups must be a multiple of 8 (two nibbles per byte), got ",
             s.group);
  QF_REQUIRE(s.bits != 5 || s.group % kBitPlaneK == 0,
             "quant scheme: int5 groups must be a multiple of ", kBitPlaneK,
             " (one fifth-bit row per 32 k), got ", s.group);
  QF_REQUIRE(s.group <= kMaxGroup, "quant scheme: group size ", s.group, " exceeds ", kMaxGroup,
             " (int32 accumulator bound)");
  if (s.superblock == 0) return;
  const int groups = s.superblock / s.group;
  QF_REQUIRE(s.superblock > 0 && s.superblock % s.group == 0 && groups <= kMaxSuperblockGroups &&
                 (groups & (groups - 1)) == 0,
             "quant scheme: a super-block must be a power-of-two number (at most ",
             kMaxSuperblockGroups, ") of groups, got ", s.superblock, " k of groups of ", s.group);
  QF_REQUIRE(s.bits != 8 || !s.asymmetric,
             "quant scheme: two-level scales are int4 / int5 (symmetric or asymmetric) or int8 "
             "symmetric, not int8 asymmetric");
}

QuantScheme parse_quant_scheme(std::string_view text, std::string_view where) {
  auto bad = [&]() {
    fail(where, ": unknown quantization '", text,
         "' (forms: int8, int5, int4, int8-g<G>, int5-g<G>, int4-g<G>, each optionally "
         "-asym; int8-tensor; per-group two-level scales: int4-g<G>-sb<S>; "
         "any of them prefixed woq- for weight-only)");
  };
  QuantScheme s;
  std::string_view rest;
  std::string_view body = text;
  if (body.substr(0, 4) == "woq-") {
    s.weight_only = true;
    body.remove_prefix(4);
  }
  if (body.substr(0, 4) == "int8") {
    s.bits = 8;
  } else if (body.substr(0, 4) == "int5") {
    s.bits = 5;
  } else if (body.substr(0, 4) == "int4") {
    s.bits = 4;
  } else {
    bad();
  }
  rest = body.substr(4);
  if (rest.size() >= 5 && rest.substr(rest.size() - 5) == "-asym") {
    s.asymmetric = true;
    rest.remove_suffix(5);
  }
  if (rest.empty()) {
    s.granularity = Granularity::per_channel;
  } else if (rest == "-tensor") {
    s.granularity = Granularity::per_tensor;
  } else if (rest.substr(0, 2) == "-g") {
    s.granularity = Granularity::per_group;
    std::string_view digits = rest.substr(2);
    if (const std::size_t sb = digits.find("-sb"); sb != std::string_view::npos) {
      const std::string_view super_digits = digits.substr(sb + 3);
      auto [end, ec] = std::from_chars(super_digits.data(),
                                       super_digits.data() + super_digits.size(), s.superblock);
      if (ec != std::errc() || end != super_digits.data() + super_digits.size() ||
          s.superblock <= 0)
        bad();
      digits = digits.substr(0, sb);
    }
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), s.group);
    if (ec != std::errc() || end != digits.data() + digits.size()) bad();
  } else {
    bad();
  }
  try {
    validate(s);
  } catch (const Error& e) {
    fail(where, ": ", e.what());
  }
  return s;
}

std::string to_string(const QuantScheme& s) {
  std::string name = s.weight_only ? "woq-" : "";
  name += "int" + std::to_string(s.bits);
  if (s.granularity == Granularity::per_tensor) name += "-tensor";
  if (s.granularity == Granularity::per_group) name += "-g" + std::to_string(s.group);
  if (s.superblock != 0) name += "-sb" + std::to_string(s.superblock);
  if (s.asymmetric) name += "-asym";
  return name;
}

}  // namespace qforge
