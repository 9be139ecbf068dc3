// How a weight tensor is quantized: bit width, symmetry, and where the scales change.
//
//   "int8"            int8, symmetric, per-channel (one scale per output row)
//   "int8-g128"       int8, symmetric, one scale per 128 consecutive k of a row
//   "int4-g32-asym"   int4, asymmetric (scale + zero point) per 32 k
//   "int8-tensor"     int8, symmetric, one scale for the whole tensor
//   "int5-g32-asym"   5-bit values (GGUF's Q5_0 / Q5_1 / Q5_K): int4's nibbles plus a plane
//                     of fifth bits per 32 k
//   "int4-g32-sb256-asym"
//                     two-level scales, as GGUF's K-quants hold them: each group's scale
//                     (and offset) is a small integer times an f16 of its 256-k super-block
//   "woq-int4-g128"   the same weights, run weight-only: activations stay f32 and the
//                     kernels dequantize the packed weights in registers (FMA)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qforge {

enum class Granularity : std::uint8_t { per_tensor, per_channel, per_group };

struct QuantScheme {
  int bits = 8;             // 8, 5 or 4
  bool asymmetric = false;  // zero point per group
  Granularity granularity = Granularity::per_channel;
  int group = 0;  // k per scale for per_group; 0 otherwise
  // k per super-block of two-level scales (a multiple of the group, a power-of-two number
  // of groups); 0 for one-level scales. Packed: ops/quant/packed_layout.h.
  int superblock = 0;
  // Weight-only: the packed layout is the same; only the kernels' activation operand
  // differs (f32 rows instead of per-token int8).
  bool weight_only = false;

  bool operator==(const QuantScheme&) const = default;
  bool two_level() const { return superblock != 0; }
  int superblock_groups() const { return superblock != 0 ? superblock / group : 0; }
};
// The stored integer range of a bit width: symmetric [-2^(b-1), 2^(b-1) - 1] (int8 uses
// [-127, 127] when qforge quantizes, [-128, 127] when a file's values are kept), asymmetric
// [0, 2^b - 1].
constexpr int stored_min(int bits, bool asymmetric) {
  return asymmetric ? 0 : -(1 << (bits - 1));
}
constexpr int stored_max(int bits, bool asymmetric) {
  return asymmetric ? (1 << bits) - 1 : (1 << (bits - 1)) - 1;
}
// The range qforge quantizes into: the stored range, but int8 symmetric [-127, 127].
constexpr int quantize_min(int bits, bool asymmetric) {
  return bits == 8 && !asymmetric ? -127 : stored_min(bits, asymmetric);
}
// Whether the quantized range has one level more below zero than above (symmetric int4
// [-8, 7] and int5 [-16, 15]; not int8's [-127, 127]): rounding puts a group's extreme on
// that level with a signed scale, and the clipping searches try both signs.
constexpr bool extra_negative_level(int bits, bool asymmetric) {
  return !asymmetric && quantize_min(bits, false) < -stored_max(bits, false);
}
// The k one step of the fifth-bit plane covers: int5 groups are whole multiples of it.
inline constexpr int kBitPlaneK = 32;

// Most groups of a super-block (the packed layout stores their number in 16 bits).
inline constexpr int kMaxSuperblockGroups = 256;

// Largest group for which 255 * 128 * g cannot overflow an int32 accumulator.
inline constexpr int kMaxGroup = 65536;
static_assert(255LL * 128 * kMaxGroup < (1LL << 31), "int32 group accumulator would overflow");

// The scheme with weight_only cleared: all that decides the quantized values and the
// packed bytes (a weight-only layer packs exactly what its W8A8 twin packs).
inline QuantScheme stored_form(QuantScheme scheme) {
  scheme.weight_only = false;
  return scheme;
}

// Parses the names above; throws qforge::Error naming `where` and listing the forms.
QuantScheme parse_quant_scheme(std::string_view text, std::string_view where = "--quant");
std::string to_string(const QuantScheme& scheme);
// Checks bits, group (multiple of 4, of 8 for int4, of 32 for int5, <= kMaxGroup) and
// super-block;
// throws otherwise.
void validate(const QuantScheme& scheme);

}  // namespace qforge
