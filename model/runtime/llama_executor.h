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
// A prompt runs as one batch per chunk of up to kChunkRows rows; decode is one row. The
// layers behind a norm (qkv, gate/up, classifier) take x and the norm weight
// (LinearLayer::forward_normalized): the int8 layers quantize each row as it is
// normalized, so xb is written only where an f32 layer (or an observer) needs it.
//
// Calibration runs the same pass a block at a time over many sequences (embed_rows,
// forward_block, forward_head on the caller's residual rows), and an observer sees the
// input of every linear layer:
//
//   site        input (rows x k)              layer
//   qkv         rmsnorm(x) * attn_norm        [Wq | Wk | Wv]
//   wo          attention output               Wo
//   gate_up     rmsnorm(x) * ffn_norm          Wg, Wu
//   down        silu(gate) * up                Wd
//   classifier  rmsnorm(x) * output_norm       Wcls   (layer = -1)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/runtime/kv_cache.h"
#include "model/runtime/llama_weights.h"
#include "ops/linear/thread_pool.h"

namespace qforge {

enum class LinearSite { qkv, wo, gate_up, down, classifier };
const char* site_name(LinearSite site);  // "attn_qkv", "attn_output", "ffn_gate_up", ...

// Sees each linear layer's input before the layer runs: `x` is rows x k, row-major, dense.
class LinearInputObserver {
 public:
  virtual ~LinearInputObserver() = default;
  virtual void observe(int layer, LinearSite site, const float* x, int rows, int k) = 0;
};

// One row of a batch over several sequences: `token` at `position` of `sequence`, and
// whether its logits are wanted.
struct BatchToken {
  int token = 0;
  int sequence = 0;
  int position = 0;
  bool logits = false;
};

class LlamaExecutor {
 public:
  static constexpr int kChunkRows = 128;

  // `weights` and `pool` must outlive the executor. The cache holds `positions`
  // positions (0: the model's context length) for each of `sequences` sequences, each in
  // a region of its own:
  //
  //   cache rows of a kv head:  [ sequence 0: positions 0..P-1 | sequence 1: 0..P-1 | ... ]
  LlamaExecutor(LlamaWeights& weights, ThreadPool& pool, int positions = 0, int sequences = 1);

  // Runs `tokens` at positions [start, start + size) and returns the last token's logits,
  // or with all_logits every token's (size x vocab, row-major). The span stays valid until
  // the next call.
  std::span<const float> forward(std::span<const int> tokens, int start, bool all_logits = false);

  // Continuous batching: rows of any sequences at any positions go through the layers
  // together (M = rows: one weight stream for all of them), each row attending to its own
  // sequence's cache up to its position. A sequence's rows must come in position order,
  // every earlier position already cached or earlier in the batch. Returns the logits of
  // the rows that ask for them, in batch order (count x vocab). Each row's logits are
  // bit-identical to running its sequence alone (neither the M of a call nor its
  // neighbours change the arithmetic of a row).
  std::span<const float> forward_batch(std::span<const BatchToken> rows);

  // The observer (or nullptr) sees every linear input of the calls that follow.
  void set_observer(LinearInputObserver* observer) { observer_ = observer; }

  // One block at a time over the caller's residual rows x (rows <= kChunkRows, rows x
  // dim): embedding lookup; block `layer` at positions [start, start + rows) (its KV
  // cache rows written, x updated in place); the final norm and the classifier (logits
  // rows x vocab, or nullptr to only observe its input). Running every block in order
  // and then the head computes what forward() computes, bit for bit.
  void embed_rows(std::span<const int> tokens, float* x);
  void forward_block(int layer, float* x, int rows, int start);
  void forward_head(const float* x, int rows, float* logits);

  int vocab_size() const { return config_.vocab_size; }
  int positions() const { return positions_; }  // per sequence
  int sequences() const { return sequences_; }
  const KvCache& cache() const { return cache_; }
  KvCache& cache() { return cache_; }

 private:
  void forward_chunk(const int* tokens, int rows, int start, float* logits, bool all_logits);
  // Sets row r's sequence and position for the chunk's rows, and their rotations.
  void set_row(int r, int sequence, int position);
  // Block `layer` on rows x_[0, rows) at the positions set_row gave them.
  void block(int layer, int rows);
  void head(int first, int rows, float* logits);  // rows [first, rows) of x_
  void normalized_linear(LinearLayer& layer, int l, LinearSite site, const float* x, int rows,
                         const float* norm_weight, float* out, int ldc);
  void observe(int layer, LinearSite site, const float* x, int rows, int k) {
    if (observer_ != nullptr) observer_->observe(layer, site, x, rows, k);
  }
  void attention(int layer, int rows);
  int attention_block_positions() const;

  LlamaWeights& weights_;
  ThreadPool& pool_;
  const LlamaConfig& config_;
  int positions_;  // per sequence
  int sequences_;
  KvCache cache_;  // positions_ x sequences_ rows per kv head
  int qkv_columns_;
  // Activations of one chunk (kChunkRows rows each).
  std::vector<float> x_, xb_, qkv_, hb_;
  std::vector<float> scores_;       // per pool thread, one row of scores per head of a group
  std::vector<float> decoded_;      // per pool thread, one attention block of bf16/int8 rows as f32
  std::vector<float> rotations_;    // RoPE cos/sin per pair of a head, one row per chunk row
  std::vector<int> row_positions_;  // per chunk row: its position in its sequence
  std::vector<int> row_sequences_;  // per chunk row: its sequence
  std::vector<int> batch_tokens_ = std::vector<int>(kChunkRows);  // forward_batch's chunk
  std::vector<float> logits_;
  LinearInputObserver* observer_ = nullptr;
};

}  // namespace qforge
