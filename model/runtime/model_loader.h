// Everything `qforge run` (and the tests) need from a model file, in load order:
//
//   open (mmap, parse)  ->  tokenizer  ->  [prepare: calibrated methods]  ->  convert + quantize +
//   pack (LlamaWeights)
//   ->  generate every kernel the layers call (CodeCache warm-up)
//
// The file itself is released afterwards: the weights hold their own copies.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

struct LoadedModel {
  Tokenizer tokenizer;
  LlamaWeights weights;
  double load_seconds = 0;                   // open + tokenizer
  double pack_seconds = 0;                   // convert, quantize, pack (kernel generation excluded)
  double jit_seconds = 0;                    // generating all kernels
  std::size_t kernels = 0;                   // distinct kernels generated
  std::optional<std::string> chat_template;  // a GGUF file's tokenizer.chat_template
};

// Changes the opened file before its weights are built (calibrated methods: replaced and
// prequantized tensors, model/model_file.h).
using ModelPreparer = std::function<void(ModelFile& file, const Tokenizer& tokenizer)>;

// `tokenizer_path` may be empty (see load_model_tokenizer); threads 0 = all cores for packing.
LoadedModel load_model(const std::string& path, const Precision& precision,
                       const std::string& tokenizer_path = "", int threads = 0,
                       const LoadProgress& progress = {}, const ModelPreparer& prepare = {});

// The model's tokenizer: `path` if given (a llama2.c tokenizer.bin), else a GGUF file's
// embedded vocabulary, else tok<vocab>.bin or tokenizer.bin beside a llama2.c checkpoint.
Tokenizer load_model_tokenizer(const ModelFile& model, const std::string& path = "");

}  // namespace qforge
