// The Llama forward pass (llama2.c's run.c, batched over the rows of a prompt chunk):
//
//   x = embedding[token]                                        rows x dim
//   per layer:
//     xb  = rmsnorm(x) * attn_norm
//     qkv = xb [Wq | Wk | Wv]^T                                 rows x (dim + 2 kv_dim)
//     rotate q, k by position (adjacent pairs), append k, v to the cache
//     xb  = softmax(q k^T / sqrt(head_dim), causal) v           per head; kv head = h / group
//     x  += xb Wo^T                                             (residual epilogue)
//     xb  = rmsnorm(x) * ffn_norm
//     hb  = silu(xb Wg^T) * (xb Wu^T)                           (SwiGLU epilogue)
//     x  += hb Wd^T                                             (residual epilogue)
//   logits = (rmsnorm(x) * output_norm) Wcls^T
//
// A prompt runs as one batch per chunk of up to kChunkRows rows; decode is one row.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_cache.h"
#include "model/llama_weights.h"
#include "ops/linear/thread_pool.h"

namespace qforge {

class LlamaExecutor {
 public:
  static constexpr int kChunkRows = 128;

  // `weights` and `pool` must outlive the executor. The cache holds `positions`
  // positions (0: the model's context length).
  LlamaExecutor(LlamaWeights& weights, ThreadPool& pool, int positions = 0);

  // Runs `tokens` at positions [start, start + size) and returns the last token's logits,
  // or with all_logits every token's (size x vocab, row-major). The span stays valid until
  // the next call.
  std::span<const float> forward(std::span<const int> tokens, int start, bool all_logits = false);

  int vocab_size() const { return config_.vocab_size; }
  int positions() const { return cache_.positions(); }
  const KvCache& cache() const { return cache_; }

 private:
  void forward_chunk(const int* tokens, int rows, int start, float* logits, bool all_logits);
  void attention(int layer, int rows, int start);
  int attention_block_positions() const;

  LlamaWeights& weights_;
  ThreadPool& pool_;
  const LlamaConfig& config_;
  KvCache cache_;
  int qkv_columns_;
  // Activations of one chunk (kChunkRows rows each).
  std::vector<float> x_, xb_, qkv_, hb_;
  std::vector<float> scores_;     // per pool thread, one row of scores per head of a group
  std::vector<float> rotations_;  // RoPE cos/sin per pair of a head, one row per position
  std::vector<float> logits_;
};

}  // namespace qforge
