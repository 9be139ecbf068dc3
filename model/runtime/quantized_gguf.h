// `qforge quantize -o`: a GGUF file holding qforge's quantization of a model, so `qforge
// run` loads it without quantizing again (a native load packs the very values quantizing
// at load packs). Where a ggml type holds the scheme exactly, that type, so llama.cpp
// reads the file too; every other scheme in qforge's encoding (model/qforge_encoding.h):
//
//   linear tensor, token_embd    scheme (default --quant)  ->  int8-g32       Q8_0
//                                                               int4-g32       Q4_0
//                                                               int4-g32-asym  Q4_1
//                                                               int5-g32       Q5_0
//                                                               int5-g32-asym  Q5_1
//                                                               any other      I8 operand rows
//                                                                              + F32 scales
//                                                                              (+ I8 zeros)
//                                f32 / bf16 (--keep)        ->  F32 / BF16
//                                native                     ->  the file's ggml blocks
//                                                               (K-quants too), or its encoded
//                                                               parts, copied
//   norms, anything else         copied as they are (SmoothQuant / AWQ's folded norms too)
//
// Each group is quantized exactly as packing does (ops/quant/quantize_fast.h: f16 scale
// rounded up, round half away; a per-tensor scale over the fused q | k | v layer, as a load
// stacks it), or taken as a calibrated method left it (GPTQ's integers), and written as
// the ggml block of the same values:
//   Q8_0 d = s, q;   Q4_0 d = s, nibble = q + 8;   Q4_1 d = s, m = f16(-s z), nibble = q;
//   Q5_0 / Q5_1 as Q4_0 / Q4_1 with q + 16 / q in 0..31, the fifth bits in qh.
// Two-level schemes (a K-quant file's) are refused: only --quant native keeps them.
// A g32 tensor whose rows are not whole blocks of 32 stays as the source holds it
// (llama-quantize stops at such a tensor). The embedding and the classifier get the scheme
// too (llama-quantize quantizes them as well), unless a rule keeps them. The metadata is the
// source's, with general.file_type set and qforge.quantize.* added, and the model's static
// activation scales as qforge.activation_scale.<layer> (model/model_file.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/format/gguf_types.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

struct QuantizedFileTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::string choice;  // "int4-g32", "f32", "native", "copied"
  std::uint64_t source_bytes = 0, bytes = 0;
};

struct QuantizedFile {
  std::vector<QuantizedFileTensor> tensors;
  std::uint64_t source_bytes = 0, bytes = 0;
};

// The ggml type holding `scheme` exactly, or nullopt.
std::optional<GgmlType> ggml_type_of(const QuantScheme& scheme);

// Throws qforge::Error when no file can be written from `model` under `precision` at all
// (--quant f32 / bf16; a llama2.c checkpoint without its tokenizer), so a caller can
// refuse before any calibration runs. write_quantized_gguf checks it too.
void require_quantized_gguf_source(const ModelFile& model, const Precision& precision,
                                   const Tokenizer* tokenizer = nullptr);

// Writes `model` under `precision`'s scheme and rules to `path` (via "<path>.tmp",
// renamed when complete). Throws qforge::Error naming the tensor or rule at fault before
// anything is written. `progress(done, total)` after each tensor. A llama2.c checkpoint
// gets the metadata llama.cpp's converter writes: general.name (the file's stem), its
// config's keys (llama_config_to_gguf) and `tokenizer`'s vocabulary (Tokenizer::to_gguf).
QuantizedFile write_quantized_gguf(
    const ModelFile& model, const Precision& precision, const std::string& path,
    const std::function<void(std::size_t, std::size_t)>& progress = {},
    const Tokenizer* tokenizer = nullptr);

}  // namespace qforge
