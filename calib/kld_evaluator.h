// The mean KLD of a model's logits from the f32 model's over fixed chunks of a text, as
// `qforge perplexity` measures it (model/perplexity.h), with the f32 logits computed once
// and kept: every evaluation after the first runs only the model under test.
#pragma once

#include <span>
#include <vector>

#include "model/runtime/llama_executor.h"
#include "model/runtime/perplexity.h"

namespace qforge {

class KldEvaluator {
 public:
  // `tokens` (BOS first) holds at least `chunks` chunks of `ctx`; `reference` runs them now.
  KldEvaluator(LlamaExecutor& reference, std::span<const int> tokens, int ctx, int chunks, int bos);

  PerplexityResult evaluate(LlamaExecutor& model) const;
  int chunks() const { return chunks_; }
  int ctx() const { return ctx_; }

 private:
  std::vector<int> tokens_;
  int ctx_, chunks_, vocab_, bos_;
  std::vector<std::vector<float>> reference_;  // per chunk, ctx x vocab
};

}  // namespace qforge
