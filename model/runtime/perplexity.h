// Perplexity as llama.cpp's llama-perplexity measures it, and the distance of a quantized
// model's distributions from the f32 model's (KL divergence, top-1 agreement).
//
//   tokens  = encode(text) with BOS                  split into chunks of ctx tokens
//   chunk c = [BOS, t_1 .. t_{ctx-1}]                first token replaced by BOS
//   logits  = forward(chunk) at every position        one batch per chunk
//   scored  = positions ctx/2 .. ctx-2, predicting the next token of the chunk
//             (the first half only gives the model context)
//
//   NLL_i   = -log softmax(logits_i)[t_{i+1}]          PPL = exp(mean NLL)
//   KLD_i   = sum_v p_ref(v) (log p_ref(v) - log p(v))  p_ref from the reference model
//   top-1   = argmax p == argmax p_ref
// All sums in double. Uncertainties are standard errors of the mean over scored tokens
// (PPL's by propagation: PPL * stderr(NLL)).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

namespace qforge {

// Produces the logits of every position of `chunk` (chunk.size() x vocab, row-major).
using ChunkLogits = std::function<std::span<const float>(std::span<const int> chunk)>;

struct PerplexityResult {
  int chunks = 0;
  std::int64_t scored_tokens = 0;
  double mean_nll = 0, nll_stderr = 0;
  double perplexity = 0, perplexity_stderr = 0;
  // Against the reference model (when one was given).
  bool has_reference = false;
  double reference_perplexity = 0;
  double mean_kld = 0, kld_stderr = 0;
  double top1_agreement = 0;  // fraction of scored tokens
};

// Evaluates `tokens` in chunks of `ctx`, each chunk starting with `bos` (-1: the text's own
// token, for vocabularies without BOS); `reference` may be empty. The text
// must hold at least one whole chunk. `progress(done, total)` is called after each chunk.
PerplexityResult evaluate_perplexity(std::span<const int> tokens, int ctx, int vocab, int bos,
                                     const ChunkLogits& model, const ChunkLogits& reference = {},
                                     const std::function<void(int, int)>& progress = {});

}  // namespace qforge
