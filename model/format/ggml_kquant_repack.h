// GGUF K-quant super-blocks as qforge's two-level packed groups, without requantization
// (ops/quant/packed_layout.h, "Two-level scales"). Each block of 256 values gives its
// integers as they are stored, its sub-block scale (and minimum) integers and its f16 d
// (and dmin):
//
//   type   qforge scheme          stored q          scale           offset
//   Q4_K   int4-g32-sb256-asym    nibble  0..15     sc * d          m * (-dmin)
//   Q5_K   int5-g32-sb256-asym    0..31             sc * d          m * (-dmin)
//   Q2_K   int4-g16-sb256-asym    2 bits  0..3      sc * d          m * (-dmin)
//   Q3_K   int4-g16-sb256         q - 4 * !hbit     (sc - 32) * d
//                                 in -4..3
//   Q6_K   int8-g16-sb256         q - 32 in -32..31 sc (s8) * d
//
// so the packed weights are ggml's decode (ggml_kquants.h) bit for bit: ggml forms the
// same products d * sc and dmin * m in f32 (exact) and w = d1 * q - m1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "model/format/gguf_types.h"
#include "ops/quant/quantize.h"

namespace qforge {

// The scheme a K-quant type is repacked into (every K-quant has one).
std::optional<QuantScheme> kquant_scheme(GgmlType type);

// One super-block of `type` (kquant_scheme(type) has a value) as the packed layout's
// operands (256 bytes: operand_of(q)) and its 256 / g groups' params. Throws
// qforge::Error naming `what` if d or dmin is not finite.
void kquant_block_operands(GgmlType type, const std::byte* block, std::uint8_t* operands,
                           GroupParams* params, const char* what);

}  // namespace qforge
