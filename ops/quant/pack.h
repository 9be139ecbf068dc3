// Quantize + pack weights into the panel layout (ops/quant/packed_layout.h), and the
// inverse (unpack) that tests and tools use to look inside a packed buffer.
#pragma once

#include <cstdint>
#include <functional>

#include "jit/base/aligned_buffer.h"
#include "ops/quant/packed_layout.h"
#include "ops/quant/quantize.h"

namespace qforge {

struct PackedWeights {
  PackedHeader header;
  PackedGeometry geometry;
  AlignedBuffer<std::uint8_t> data;  // geometry.total_bytes, 64-byte aligned

  const std::uint8_t* panel(std::int64_t p) const { return data.data() + p * geometry.panel_bytes; }
  std::int64_t n() const { return header.n; }
  std::int64_t k() const { return header.k; }
  bool asymmetric() const { return header.asymmetric != 0; }
  int bits() const { return header.bits; }
};

// Quantizes the row-major N x K matrix `weights` and packs it (threads = 0: all cores).
PackedWeights pack_weights(const float* weights, std::int64_t n, std::int64_t k,
                           const QuantScheme& scheme, int threads = 0);
// The same, reading the matrix 16 rows at a time from `rows(first, count, out)` (count x
// K floats), so a large matrix is never whole in f32. Not for per-tensor scales. The
// packing threads call `rows` concurrently, for disjoint rows; it must not start threads.
using RowSource = std::function<void(std::int64_t first, std::int64_t count, float* out)>;
PackedWeights pack_weights_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                   const RowSource& rows, int threads = 0);
// Packs two N x K matrices as interleaved gate/up panels for the fused SwiGLU kernel.
PackedWeights pack_swiglu_pair(const float* gate, const float* up, std::int64_t n, std::int64_t k,
                               const QuantScheme& scheme, int threads = 0);
// The same a chunk of rows of both at a time (same bytes; not for per-tensor scales).
PackedWeights pack_swiglu_pair_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                       const RowSource& gate_rows, const RowSource& up_rows,
                                       int threads = 0);
// Packs rows that are already quantized, 16 at a time, as pack_weights_by_rows packs
// floats: `rows(first, count, operands, params)` writes count x K_p operand bytes (the
// packed layout's operands, operand_of below; K_p = the header's padded K, padding
// included; int4 operands < 16) and count x groups params (scale, zero point, and the
// float offset of a GGUF Q4_1 minimum). A GGUF file's blocks or qforge's encoding stream
// into the packed layout without a whole-matrix QuantizedTensor.
using OperandRowSource = std::function<void(std::int64_t first, std::int64_t count,
                                            std::uint8_t* operands, GroupParams* params)>;
PackedWeights pack_operands_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                    const OperandRowSource& rows, int threads = 0);
// The same for a gate/up pair, interleaved as pack_swiglu_pair does.
PackedWeights pack_operand_pair_by_rows(std::int64_t n, std::int64_t k, const QuantScheme& scheme,
                                        const OperandRowSource& gate_rows,
                                        const OperandRowSource& up_rows, int threads = 0);
// Packs an already quantized tensor exactly (no requantization), e.g. a GGUF Q8_0 tensor.
PackedWeights pack_quantized(const QuantizedTensor& tensor, int threads = 0);
// The same for a gate/up pair (same scheme and shape), interleaved as pack_swiglu_pair does.
PackedWeights pack_quantized_pair(const QuantizedTensor& gate, const QuantizedTensor& up,
                                  int threads = 0);

// Reads the stored values, scales and zero points back. For a pair, `half` selects
// gate (0) / up (1).
QuantizedTensor unpack_weights(const PackedWeights& packed, int half = 0);

// What a group holds, as the kernels see it: the u8 operand of column lane c, element i
// (packed_layout.h), and the f16 scale / offset (asymmetric only) of column lane c in a
// one-level trailer.
int packed_operand(const std::uint8_t* group, int bits, int lane, std::int64_t i);
float group_scale(const std::uint8_t* group_trailer, int lane);
float group_offset(const std::uint8_t* group_trailer, int lane);

// Group j of a panel, and the scale / offset of its column lane c (either scale form).
const std::uint8_t* packed_group(const std::uint8_t* panel, const PackedGeometry& geo,
                                 std::int64_t j);
float packed_scale(const std::uint8_t* panel, const PackedGeometry& geo, std::int64_t j, int lane);
float packed_offset(const std::uint8_t* panel, const PackedGeometry& geo, std::int64_t j, int lane);

// The u8 operand that encodes stored value q, and back (the table in packed_layout.h).
int operand_of(int q, int bits, bool asymmetric);
int value_of_operand(int operand, int bits, bool asymmetric);

}  // namespace qforge
