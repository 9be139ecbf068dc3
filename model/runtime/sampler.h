// Picks the next token from logits the way llama2.c's run.c does:
//
//   temperature 0        argmax (the first maximum)
//   otherwise            softmax(logits / temperature), then
//                          top-k (k > 0): keep the k most probable, renormalised
//                          top-p (0 < p < 1): sample from the smallest set whose
//                                           probability exceeds p (run.c's sample_topp)
//                          else sample the whole distribution
//
// The coin is run.c's xorshift64* generator: the same seed gives the same tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qforge {

struct SamplerOptions {
  float temperature = 1.f;
  int top_k = 0;  // 0: off
  float top_p = 0.9f;
  std::uint64_t seed = 1;
};

class Sampler {
 public:
  explicit Sampler(SamplerOptions options);

  // `logits` is scratch: it is overwritten with probabilities.
  int sample(std::span<float> logits);

  static int argmax(std::span<const float> values);

 private:
  struct Candidate {
    float probability;
    int index;
  };

  float random_f32();
  int sample_top_p(std::span<const float> probabilities, float coin);

  SamplerOptions options_;
  std::uint64_t state_;
  std::vector<Candidate> candidates_;
};

}  // namespace qforge
