#include "calib/kld_evaluator.h"

#include "jit/base/error.h"

namespace qforge {

KldEvaluator::KldEvaluator(LlamaExecutor& reference, std::span<const int> tokens, int ctx,
                           int chunks, int bos)
    : ctx_(ctx), chunks_(chunks), vocab_(reference.vocab_size()), bos_(bos) {
  QF_REQUIRE(chunks >= 1 && tokens.size() >= static_cast<std::size_t>(chunks) * ctx,
             "KLD evaluation: ", tokens.size(), " tokens hold fewer than ", chunks, " chunks of ",
             ctx);
  tokens_.assign(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(chunks) * ctx);
  evaluate_perplexity(tokens_, ctx_, vocab_, bos_, [&](std::span<const int> chunk) {
    const std::span<const float> logits = reference.forward(chunk, 0, /*all_logits=*/true);
    reference_.emplace_back(logits.begin(), logits.end());
    return logits;
  });
}

PerplexityResult KldEvaluator::evaluate(LlamaExecutor& model) const {
  std::size_t next = 0;
  return evaluate_perplexity(
      tokens_, ctx_, vocab_, bos_,
      [&](std::span<const int> chunk) { return model.forward(chunk, 0, /*all_logits=*/true); },
      [&](std::span<const int>) { return std::span<const float>(reference_.at(next++)); });
}

}  // namespace qforge
