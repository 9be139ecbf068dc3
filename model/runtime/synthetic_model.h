// Synthetic Llama models for speed work at real sizes: a spec-exact GGUF v3 file with the
// dimensions of a published model, random weights and a placeholder vocabulary.
//
//   matrices   normal(0, 0.02), encoded to the chosen type (f32, f16, bf16, q8_0, q4_0, q4_1)
//   norms      1.0 (f32, as llama.cpp's converter stores them)
//   vocabulary llama2 style: SentencePiece: <unk> <s> </s>, the 256 byte tokens
//              <0x00>..<0xFF>, then "▁tN" pieces up to the preset's vocabulary size (any
//              text encodes through byte fallback)
//              llama3 style: byte-level BPE ("gpt2", pre "llama-bpe"): the 256 bytes, no
//              merges, unused "[PADn]" tokens, and Llama 3's 256 special tokens at the top
//              (128000.. in a 128256 vocabulary: <|begin_of_text|>, <|end_of_text|>, ...,
//              <|start_header_id|>, <|end_header_id|>, <|eom_id|>, <|eot_id|>), its chat
//              template; RoPE theta 500000 with Llama 3.1's frequency factors
//              (rope_freqs.weight) and a tied embedding
//
// Values are a pure function of (seed, tensor, row): the same seed gives the same file
// whatever the thread count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "model/format/gguf_types.h"
#include "model/format/llama_config.h"

namespace qforge {

enum class SyntheticStyle { Llama2, Llama3 };

struct SyntheticModelSpec {
  std::string name;  // general.name
  LlamaConfig config;
  SyntheticStyle style = SyntheticStyle::Llama2;
  GgmlType type = GgmlType::F16;  // matrices, token embedding included
  std::uint64_t seed = 1;
};

// "tinyllama-1.1b" | "llama2-7b" | "llama3.2-1b" | "llama3-8b" | "stories260k" | a list of
// dims "dim=D,hidden=H,layers=L,heads=Q,kv-heads=KV,vocab=V[,ctx=C][,style=llama3]".
// Throws qforge::Error naming the preset and the field.
LlamaConfig synthetic_preset(std::string_view preset);
// The preset's config and style (llama3 for the llama3 presets and style=llama3).
SyntheticModelSpec synthetic_spec(std::string_view preset);
std::string synthetic_preset_names();

// "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "q4_1"
GgmlType parse_synthetic_type(std::string_view type);

// Writes the model to `path` atomically (a failure leaves nothing behind).
void write_synthetic_model(const SyntheticModelSpec& spec, const std::string& path);

}  // namespace qforge
