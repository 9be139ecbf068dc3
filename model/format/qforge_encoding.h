// qforge's own encoding of a quantized tensor inside GGUF, for the schemes no ggml type
// holds (per-channel, g128, int8 asymmetric, per-tensor, and what GPTQ / AWQ made of
// them). Plain tensors and metadata, version 1:
//
//   metadata  qforge.encoding.version          u32     1 (a reader refuses any other)
//             qforge.encoded.<T>.scheme        string  "int4-g128", "int8", "int8-g64-asym"...
//             qforge.encoded.<T>.columns       u64     K, the logical columns
//             qforge.encoded.<T>.method        string  what made the values ("gptq"), optional
//   tensors   <T>          I8   [row bytes, N]   the operands of every row, K_p of them
//                                                (K rounded up to the group / per-channel
//                                                alignment: the packed layout's K_p)
//             <T>.scale    F32  [groups, N]      each group's scale (an f16 value)
//             <T>.zero     I8   [groups, N]      asymmetric only: each group's zero point
//
// Operands are the packed layout's bytes, read as unsigned (ops/quant/pack.h operand_of):
//   int8 sym  q + 128       int8 asym  q (0..255, zero point 0..255)
//   int5 sym  q + 16        int5 asym  q (0..31, zero point 0..31)
//   int4 sym  q + 8         int4 asym  q (0..15, zero point 0..15)
// int8 and int5 take a byte each; int4 puts two per byte, the even k in the low nibble: byte j =
// op[2j] | op[2j + 1] << 4. The values are w = s * (q - z) for every scheme; the packed layout and
// `dequantize` compute exactly what packing these operands gives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "model/format/gguf_reader.h"
#include "ops/quant/quantize.h"
#include "ops/quant/scheme.h"

namespace qforge {

inline constexpr std::uint32_t kQforgeEncodingVersion = 1;
inline constexpr std::string_view kQforgeEncodingVersionKey = "qforge.encoding.version";
inline constexpr std::string_view kQforgeEncodedKey = "qforge.encoded.";

// "qforge.encoded.<tensor>.<field>".
std::string encoded_key(std::string_view tensor, std::string_view field);
std::string encoded_scale_name(std::string_view tensor);  // "<tensor>.scale"
std::string encoded_zero_name(std::string_view tensor);   // "<tensor>.zero"

// The geometry of an encoded N x K tensor under `scheme` (stored form).
struct EncodedGeometry {
  QuantScheme scheme;
  std::int64_t n = 0, k = 0, k_padded = 0, group = 0;
  std::int64_t groups() const { return k_padded / group; }
  std::uint64_t row_bytes() const;  // operand bytes of a row: K_p, or K_p / 2 (int4)
};
EncodedGeometry encoded_geometry(std::int64_t n, std::int64_t k, const QuantScheme& scheme);

// A tensor of a file in this encoding: where its three parts are (in the mapping).
struct EncodedTensor {
  EncodedGeometry geometry;
  const std::byte* operands = nullptr;  // N x row_bytes
  const std::byte* scales = nullptr;    // N x groups f32, unaligned
  const std::byte* zeros = nullptr;     // N x groups bytes, or nullptr (symmetric)
  std::string method;                   // "" or what made the values ("gptq")
};

// The encoded tensor `info` of `gguf` is, or nullopt when the file does not say it is
// encoded. Throws qforge::Error naming the file and the key or tensor at fault: an unknown
// encoding version, a scheme that does not parse, parts missing or of the wrong type or
// shape, a scale that is not finite (or negative where the scheme is asymmetric), a zero point out
// of range.
std::optional<EncodedTensor> read_encoded_tensor(const GgufReader& gguf,
                                                 const GgufTensorInfo& info);
// Whether `name` is the scale or zero part of an encoded tensor of `gguf`.
bool is_encoded_part(const GgufReader& gguf, std::string_view name);

// Row `row` decoded: out[c] = s * (q - z) (the packed layout's arithmetic), K floats.
void decode_encoded_row(const EncodedTensor& tensor, std::int64_t row, std::span<float> out);

// Rows [first, first + count) of `tensor` into `q` (N x K_p stored values), `scales`,
// `zero_points` (N x groups) at row `at`: the QuantizedTensor packing takes.
void decode_encoded_rows(const EncodedTensor& tensor, QuantizedTensor& out, std::int64_t at);

// One row's operands (K_p bytes, already the packed layout's operands) as the file
// stores them (row_bytes bytes).
void encode_operand_row(const std::uint8_t* operands, const EncodedGeometry& geometry,
                        std::byte* out);

}  // namespace qforge
