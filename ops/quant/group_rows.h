// The data rows of one packed group, laid out from its 16 columns' operand bytes
// (ops/quant/packed_layout.h). A row is 64 bytes: one 4-byte word per column,
//
//   operands of column c:  operands[c * g + i],  i = 0 .. g-1
//   int8 row r, word c:    operand(4r) .. operand(4r+3)               (g / 4 rows)
//   int4 row r, word c:    byte j = operand(8r+j) | operand(8r+4+j) << 4   (g / 8 rows)
//   int5, per 32 k:        the 4 int4 rows of (operand & 15), then the row of the fifth bits
//                          (packed_layout.h)
//
// so writing a group is a 16 x (rows) transpose of 4-byte words.
#pragma once

#include <cstdint>

namespace qforge {

// Writes the rows of one group at `dst` (groups start 32-byte aligned in a packed buffer;
// 16 bytes of a row per aligned store). int4 operands must be in 0..15, int5 in 0..31.
void write_group_rows(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g, int bits);

// The same one word at a time: the definition the fast path is tested against.
void write_group_rows_reference(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g,
                                int bits);

}  // namespace qforge
