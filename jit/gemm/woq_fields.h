// Where a weight-only kernel finds each k's operand in a packed row, and how its f32
// activations are stored to match (ops/quant/float_activations.h).
//
//   a column's dword in a packed row (ops/quant/packed_layout.h)
//     int8: [ k0 | k1 | k2 | k3 ]                 field i at bit 8 i
//     int4: [ k0 k4 | k1 k5 | k2 k6 | k3 k7 ]     field i at bit 8 (i % 4) + 4 (i / 4)
//
// The kernel takes field i with one op: masked in place (dword & (mask << p)), which is
// the operand times 2^p, or for the top field shifted down (dword >> p). The conversion
// to float is exact (at most 8 significant bits), so with x[k] stored times 2^-p the
// product is exactly operand * x[k]: the exponent below is that p, and 0 for the top field.
//
// bf16 kernels (int4 only) take two fields at once: the 16-bit halves of a dword hold
// nibbles at bits 4j + {0, 16}, j = 0..3, so after a word shift by 4j the low 5 bits of
// each half index a 32-entry table of bf16 values (vpermw), and vdpbf16ps multiplies the
// pair by the bf16 activations of the same two k, stored as one dword:
//
//   pair j:      0          1          2          3
//   fields    (k0, k2)   (k4, k6)   (k1, k3)   (k5, k7)     (low half, high half)
#pragma once

namespace qforge {

constexpr int woq_fields_per_row(int bits) {
  return bits == 8 ? 4 : 8;
}

constexpr int woq_field_shift(int bits, int i) {
  return bits == 8 ? 8 * i : 8 * (i % 4) + 4 * (i / 4);
}

constexpr bool woq_top_field(int bits, int i) {
  return woq_field_shift(bits, i) + bits == 32;
}

// x[k] is stored times 2^-e, e = woq_activation_exponent(bits, k % fields per row).
constexpr int woq_activation_exponent(int bits, int i) {
  return woq_top_field(bits, i) ? 0 : woq_field_shift(bits, i);
}

inline constexpr int kWoqBf16Pairs = 4;  // per packed row of 8 int4 fields

// The field in `half` (0 low, 1 high) of pair j: the one at bit 16 half + 4 j.
constexpr int woq_bf16_pair_field(int j, int half) {
  const int bit = 16 * half + 4 * j;
  return bit % 8 == 0 ? bit / 8 : 4 + bit / 8;
}

}  // namespace qforge
