#include "model/runtime/perplexity.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"

namespace qforge {
namespace {

// log softmax of one row of logits, in double.
void log_softmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (std::size_t v = 0; v < logits.size(); ++v) sum += std::exp(double(logits[v]) - max);
  const double log_sum = std::log(sum) + max;
  for (std::size_t v = 0; v < logits.size(); ++v) out[v] = double(logits[v]) - log_sum;
}

// Mean and standard error of the mean from running sums.
struct Moments {
  double sum = 0, sum_squares = 0;
  std::int64_t count = 0;
  void add(double x) {
    sum += x;
    sum_squares += x * x;
    ++count;
  }
  double mean() const { return count ? sum / double(count) : 0.0; }
  double stderr_of_mean() const {
    if (count < 2) return 0.0;
    const double m = mean();
    const double variance =
        std::max(0.0, (sum_squares / double(count) - m * m)) * double(count) / double(count - 1);
    return std::sqrt(variance / double(count));
  }
};

}  // namespace

PerplexityResult evaluate_perplexity(std::span<const int> tokens, int ctx, int vocab, int bos,
                                     const ChunkLogits& model, const ChunkLogits& reference,
                                     const std::function<void(int, int)>& progress) {
  QF_REQUIRE(ctx >= 4, "perplexity: --ctx ", ctx, " is too small (at least 4)");
  const int chunks = static_cast<int>(tokens.size() / static_cast<std::size_t>(ctx));
  QF_REQUIRE(chunks >= 1, "perplexity: the text has ", tokens.size(),
             " tokens, fewer than one chunk of --ctx ", ctx);
  PerplexityResult result;
  result.chunks = chunks;
  result.has_reference = static_cast<bool>(reference);
  Moments nll, reference_nll, kld;
  std::int64_t same_top1 = 0;
  std::vector<int> chunk(static_cast<std::size_t>(ctx));
  std::vector<double> log_p, log_q;
  for (int c = 0; c < chunks; ++c) {
    std::copy_n(tokens.begin() + std::ptrdiff_t(c) * ctx, ctx, chunk.begin());
    if (bos >= 0) chunk[0] = bos;  // a vocabulary without BOS keeps the text's token
    const std::span<const float> logits = model(chunk);
    QF_REQUIRE(logits.size() == std::size_t(ctx) * std::size_t(vocab),
               "perplexity: the model returned ", logits.size(), " logits for ", ctx, " tokens");
    std::span<const float> reference_logits;
    if (reference) {
      reference_logits = reference(chunk);
      QF_REQUIRE(reference_logits.size() == logits.size(), "perplexity: the reference returned ",
                 reference_logits.size(), " logits");
    }
    for (int i = ctx / 2; i + 1 < ctx; ++i) {
      const int next = chunk[std::size_t(i) + 1];
      QF_REQUIRE(next >= 0 && next < vocab, "perplexity: token ", next, " outside the vocabulary");
      log_softmax(logits.subspan(std::size_t(i) * vocab, std::size_t(vocab)), log_q);
      nll.add(-log_q[std::size_t(next)]);
      if (!reference) continue;
      log_softmax(reference_logits.subspan(std::size_t(i) * vocab, std::size_t(vocab)), log_p);
      reference_nll.add(-log_p[std::size_t(next)]);
      double divergence = 0;
      for (int v = 0; v < vocab; ++v)
        divergence +=
            std::exp(log_p[std::size_t(v)]) * (log_p[std::size_t(v)] - log_q[std::size_t(v)]);
      kld.add(std::max(0.0, divergence));
      const auto top = [](const std::vector<double>& x) {
        return std::max_element(x.begin(), x.end()) - x.begin();
      };
      same_top1 += top(log_p) == top(log_q);
    }
    if (progress) progress(c + 1, chunks);
  }
  result.scored_tokens = nll.count;
  result.mean_nll = nll.mean();
  result.nll_stderr = nll.stderr_of_mean();
  result.perplexity = std::exp(result.mean_nll);
  result.perplexity_stderr = result.perplexity * result.nll_stderr;
  if (reference) {
    result.reference_perplexity = std::exp(reference_nll.mean());
    result.mean_kld = kld.mean();
    result.kld_stderr = kld.stderr_of_mean();
    result.top1_agreement = nll.count ? double(same_top1) / double(nll.count) : 0.0;
  }
  return result;
}

}  // namespace qforge
