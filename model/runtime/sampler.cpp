#include "model/runtime/sampler.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"

namespace qforge {
namespace {

void softmax(std::span<float> x) {
  float max_value = x[0];
  for (float v : x) max_value = std::max(max_value, v);
  float sum = 0.f;
  for (float& v : x) {
    v = std::exp(v - max_value);
    sum += v;
  }
  for (float& v : x) v /= sum;
}

// Keeps the k largest probabilities (ties at the cut kept), zeroes the rest, renormalises.
void keep_top_k(std::span<float> probabilities, int k) {
  std::vector<float> sorted(probabilities.begin(), probabilities.end());
  std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
  const float cut = sorted[static_cast<std::size_t>(k - 1)];
  float sum = 0.f;
  for (float& p : probabilities) {
    if (p < cut) p = 0.f;
    sum += p;
  }
  for (float& p : probabilities) p /= sum;
}

int sample_all(std::span<const float> probabilities, float coin) {
  float cdf = 0.f;
  for (std::size_t i = 0; i < probabilities.size(); ++i) {
    cdf += probabilities[i];
    if (coin < cdf) return static_cast<int>(i);
  }
  return static_cast<int>(probabilities.size()) - 1;
}

}  // namespace

Sampler::Sampler(SamplerOptions options) : options_(options), state_(options.seed) {
  QF_REQUIRE(options.temperature >= 0.f && std::isfinite(options.temperature),
             "--temp: must be >= 0, got ", options.temperature);
  QF_REQUIRE(options.top_k >= 0, "--top-k: must be >= 0, got ", options.top_k);
  QF_REQUIRE(options.top_p >= 0.f && options.top_p <= 1.f, "--top-p: must be in [0, 1], got ",
             options.top_p);
  if (state_ == 0) state_ = 0x9E3779B97F4A7C15ull;  // xorshift must not start at 0
}

int Sampler::argmax(std::span<const float> values) {
  int best = 0;
  for (std::size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[static_cast<std::size_t>(best)]) best = static_cast<int>(i);
  return best;
}

float Sampler::random_f32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  const auto u32 = static_cast<std::uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  return static_cast<float>(u32 >> 8) / 16777216.0f;
}

int Sampler::sample(std::span<float> logits) {
  if (options_.temperature == 0.f) return argmax(logits);
  for (float& v : logits) v /= options_.temperature;
  softmax(logits);
  const int n = static_cast<int>(logits.size());
  if (options_.top_k > 0 && options_.top_k < n) keep_top_k(logits, options_.top_k);
  const float coin = random_f32();
  if (options_.top_p <= 0.f || options_.top_p >= 1.f) return sample_all(logits, coin);
  return sample_top_p(logits, coin);
}

int Sampler::sample_top_p(std::span<const float> probabilities, float coin) {
  // Values below (1 - p) / (n - 1) cannot be in the nucleus: drop them before sorting.
  const float cutoff = (1.f - options_.top_p) / static_cast<float>(probabilities.size() - 1);
  candidates_.clear();
  for (std::size_t i = 0; i < probabilities.size(); ++i)
    if (probabilities[i] >= cutoff) candidates_.push_back({probabilities[i], static_cast<int>(i)});
  std::stable_sort(
      candidates_.begin(), candidates_.end(),
      [](const Candidate& a, const Candidate& b) { return a.probability > b.probability; });
  float cumulative = 0.f;
  std::size_t last = candidates_.size() - 1;
  for (std::size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].probability;
    if (cumulative > options_.top_p) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.f;
  for (std::size_t i = 0; i <= last; ++i) {
    cdf += candidates_[i].probability;
    if (r < cdf) return candidates_[i].index;
  }
  return candidates_[last].index;
}

}  // namespace qforge
