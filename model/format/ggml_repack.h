// GGUF's own quantized tensors as qforge QuantizedTensors, without requantization:
//
//   Q8_0 block (32 values): w = d * q,       q in [-128, 127]  ->  int8 g32 symmetric,
//                                                                  scale d, q as stored
//   Q4_0 block (32 values): w = d * (n - 8), n in [0, 15]      ->  int4 g32 symmetric,
//                                                                  scale d, q = n - 8
//   Q4_1 block (32 values): w = d * n + m,   n in [0, 15]      ->  int4 g32 asymmetric,
//                                                                  scale d, q = n, offset m
// and the K-quants Q2_K, Q3_K, Q4_K and Q6_K into two-level groups (ggml_kquant_repack.h),
// so the packed kernels compute exactly what ggml's dequantized weights give (Q4_1's
// minimum m rides in the packed offset, which the kernels multiply by the activation's
// group sum, as ggml's q4_1 x q8_1 dot product does).
#pragma once

#include <optional>
#include <span>

#include "model/format/model_file.h"
#include "ops/quant/pack.h"
#include "ops/quant/quantize.h"

namespace qforge {

// A tensor in qforge's own encoding (model/qforge_encoding.h) is native too: its operands,
// scales and zero points are the QuantizedTensor's values as they are.

// The scheme a ggml type is repacked into, if it is one of the exact cases above.
std::optional<QuantScheme> native_scheme(GgmlType type);
// The scheme of a tensor's native form: its ggml type's, or its qforge encoding's.
std::optional<QuantScheme> native_scheme(const TensorView& tensor);

// The rows of `tensors` (same native scheme and columns) stacked into one tensor; throws
// qforge::Error if they have no native scheme or disagree.
QuantizedTensor native_quantized(std::span<const TensorView* const> tensors);

// The same rows as an OperandRowSource (ops/quant/pack.h), decoded 16 at a time while
// packing: what a load packs, without the whole-layer QuantizedTensor. Checks the
// tensors agree now; a non-finite scale throws when its row is read.
OperandRowSource native_operand_rows(std::span<const TensorView* const> tensors);

}  // namespace qforge
