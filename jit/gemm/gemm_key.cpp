#include "jit/gemm/gemm_key.h"

#include <functional>
#include <string>

#include "jit/base/error.h"

namespace qforge {

MBucket bucket_of(std::int64_t m, std::int64_t gemm_min_rows) {
  if (m <= 1) return MBucket::one;
  if (m < gemm_min_rows) return MBucket::small;
  return MBucket::large;
}

const char* bucket_name(MBucket bucket) {
  switch (bucket) {
    case MBucket::one:
      return "m1";
    case MBucket::small:
      return "ms";
    case MBucket::large:
      return "ml";
  }
  return "m?";
}

const char* activation_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::s8:
      return "s8";
    case ActivationKind::f32:
      return "f32";
    case ActivationKind::bf16:
      return "bf16";
    case ActivationKind::s8x2:
      return "s8x2";
    case ActivationKind::s8x3:
      return "s8x3";
  }
  return "?";
}

int split_digits(ActivationKind kind) {
  return kind == ActivationKind::s8x2 ? 2 : kind == ActivationKind::s8x3 ? 3 : 0;
}

ActivationKind parse_activation(const std::string& name, const std::string& where) {
  for (ActivationKind kind : {ActivationKind::s8, ActivationKind::f32, ActivationKind::bf16,
                              ActivationKind::s8x2, ActivationKind::s8x3})
    if (name == activation_name(kind)) return kind;
  fail(where, ": unknown activation kind '", name, "' (expected s8, f32, bf16, s8x2 or s8x3)");
}

std::string kernel_name(const GemmKey& key) {
  std::string isa(isa_name(key.isa));
  std::erase(isa, '-');
  std::string name = std::string("gemm_u8") + activation_name(key.activation) + "_" + isa + "_n" +
                     std::to_string(key.n) + "_k" + std::to_string(key.k) + "_g" +
                     (key.group == key.k_padded ? std::string("pc") : std::to_string(key.group)) +
                     (key.superblock_groups ? "x" + std::to_string(key.superblock_groups) : "") +
                     "_w" + std::to_string(key.bits) + (key.asymmetric ? "a" : "s") + "_" +
                     bucket_name(key.bucket) + "_" + std::to_string(key.blocking.mr) + "x" +
                     std::to_string(key.blocking.nr) + "u" + std::to_string(key.blocking.k_unroll);
  if (key.woq_chains) name += "c4";
  if (key.blocking.prefetch_distance > 0)
    name += "p" + std::to_string(key.blocking.prefetch_distance);
  return name + "_" + epilogue_name(key.epilogue);
}

namespace {

void mix(std::size_t& seed, std::size_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2);
}

template <typename T>
std::size_t hash_one(const T& value) {
  if constexpr (std::is_enum_v<T>) {
    return std::hash<std::underlying_type_t<T>>{}(static_cast<std::underlying_type_t<T>>(value));
  } else if constexpr (requires { value.fields(); }) {
    std::size_t seed = 0;
    std::apply([&](const auto&... f) { (mix(seed, hash_one(f)), ...); }, value.fields());
    return seed;
  } else {
    return std::hash<T>{}(value);
  }
}

}  // namespace

std::size_t GemmKeyHash::operator()(const GemmKey& key) const {
  return hash_one(key);
}

}  // namespace qforge
