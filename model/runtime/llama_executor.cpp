#include "model/runtime/llama_executor.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "model/runtime/vector_kernels.h"

namespace qforge {
namespace {

// The rotation of position `pos` for each pair p < rope_dim / 2 of a head:
//   freq = theta^(-2p / rope_dim) / factor[p],  angle = pos * freq_scale * freq,
//   out[2p] = cos, out[2p + 1] = sin
// (factor: rope_freqs.weight, or 1; freq_scale: linear RoPE scaling, or 1; computed once per
// position and used by every head of every layer).
void rope_rotation(float* out, int pos, const LlamaConfig& c) {
  for (int i = 0; i < c.rope_dim; i += 2) {
    float freq =
        1.0f / std::pow(c.rope_theta, static_cast<float>(i) / static_cast<float>(c.rope_dim));
    if (!c.rope_freq_factors.empty()) freq /= c.rope_freq_factors[static_cast<std::size_t>(i / 2)];
    const float angle = static_cast<float>(pos) * c.rope_freq_scale * freq;
    out[i] = std::cos(angle);
    out[i + 1] = std::sin(angle);
  }
}

// Rotates pair p of every head of `vec` (width columns) by rotation p:
//   (v0, v1) -> (v0 cos - v1 sin, v0 sin + v1 cos)
// where (v0, v1) is (2p, 2p+1) with adjacent pairs (run.c's loop when rope_dim = head_dim)
// and (p, p + rope_dim / 2) with split halves; dimensions past rope_dim stay as they are.
void rope(float* vec, int width, const float* rotation, const LlamaConfig& c) {
  const bool halves = c.rope_style == RopeStyle::SplitHalves;
  const int half = c.rope_dim / 2;
  for (int head = 0; head < width; head += c.head_dim)
    for (int p = 0; p < half; ++p) {
      const float fcr = rotation[2 * p], fci = rotation[2 * p + 1];
      float* a = vec + head + (halves ? p : 2 * p);
      float* b = halves ? a + half : a + 1;
      const float v0 = *a, v1 = *b;
      *a = v0 * fcr - v1 * fci;
      *b = v0 * fci + v1 * fcr;
    }
}

int checked_sequences(int sequences) {
  QF_REQUIRE(sequences >= 1, "executor: ", sequences, " sequences (at least 1)");
  return sequences;
}

}  // namespace

const char* site_name(LinearSite site) {
  switch (site) {
    case LinearSite::qkv:
      return "attn_qkv";
    case LinearSite::wo:
      return "attn_output";
    case LinearSite::gate_up:
      return "ffn_gate_up";
    case LinearSite::down:
      return "ffn_down";
    case LinearSite::classifier:
      break;
  }
  return "output";
}

LlamaExecutor::LlamaExecutor(LlamaWeights& weights, ThreadPool& pool, int positions, int sequences)
    : weights_(weights),
      pool_(pool),
      config_(weights.config),
      positions_(positions > 0 ? positions : config_.seq_len),
      sequences_(sequences),
      cache_(config_.n_layers, positions_, config_.n_kv_heads, config_.head_dim,
             weights.precision.kv, checked_sequences(sequences), kChunkRows),
      qkv_columns_(config_.dim + 2 * config_.kv_dim()) {
  const auto rows = static_cast<std::size_t>(kChunkRows);
  x_.resize(rows * config_.dim);
  xb_.resize(rows * config_.dim);
  qkv_.resize(rows * qkv_columns_);
  hb_.resize(rows * config_.hidden_dim);
  scores_.resize(static_cast<std::size_t>(pool.size()) * config_.kv_group() * positions_);
  if (cache_.type() != KvType::f32)  // one decoded block of rows per pool thread
    decoded_.resize(static_cast<std::size_t>(pool.size()) * attention_block_positions() *
                    config_.head_dim);
  rotations_.resize(rows * static_cast<std::size_t>(config_.rope_dim));
  row_positions_.resize(rows);
  row_sequences_.resize(rows);
}

std::span<const float> LlamaExecutor::forward(std::span<const int> tokens, int start,
                                              bool all_logits) {
  const int count = static_cast<int>(tokens.size());
  QF_REQUIRE(count > 0, "forward: no tokens");
  QF_REQUIRE(start >= 0 && start + count <= positions_, "forward: positions ", start, "..",
             start + count - 1, " exceed the context of ", positions_);
  const auto vocab = static_cast<std::size_t>(config_.vocab_size);
  logits_.resize((all_logits ? static_cast<std::size_t>(count) : 1) * vocab);
  for (int done = 0; done < count; done += kChunkRows) {
    const int rows = std::min(kChunkRows, count - done);
    const bool last_chunk = done + rows == count;
    float* out = all_logits   ? logits_.data() + static_cast<std::size_t>(done) * vocab
                 : last_chunk ? logits_.data()
                              : nullptr;
    forward_chunk(tokens.data() + done, rows, start + done, out, all_logits);
  }
  return logits_;
}

void LlamaExecutor::forward_chunk(const int* tokens, int rows, int start, float* logits,
                                  bool all_logits) {
  embed_rows(std::span(tokens, static_cast<std::size_t>(rows)), x_.data());
  for (int r = 0; r < rows; ++r) set_row(r, 0, start + r);
  for (int l = 0; l < config_.n_layers; ++l) block(l, rows);
  if (logits == nullptr) return;
  // The classifier sees every row, or only the last one.
  head(all_logits ? 0 : rows - 1, rows, logits);
}

void LlamaExecutor::embed_rows(std::span<const int> tokens, float* x) {
  const LlamaConfig& c = config_;
  for (std::size_t r = 0; r < tokens.size(); ++r) {
    QF_REQUIRE(tokens[r] >= 0 && tokens[r] < c.vocab_size, "forward: token ", tokens[r],
               " is outside the vocabulary of ", c.vocab_size);
    weights_.embedding.lookup(tokens[r], x + r * c.dim);
  }
}

void LlamaExecutor::forward_block(int layer, float* x, int rows, int start) {
  QF_REQUIRE(rows > 0 && rows <= kChunkRows, "forward_block: ", rows, " rows (1..", kChunkRows,
             ")");
  QF_REQUIRE(layer >= 0 && layer < config_.n_layers, "forward_block: no layer ", layer);
  QF_REQUIRE(start >= 0 && start + rows <= positions_, "forward_block: positions ", start, "..",
             start + rows - 1, " exceed the context of ", positions_);
  const std::size_t values = static_cast<std::size_t>(rows) * config_.dim;
  std::copy_n(x, values, x_.data());
  for (int r = 0; r < rows; ++r) set_row(r, 0, start + r);
  block(layer, rows);
  std::copy_n(x_.data(), values, x);
}

void LlamaExecutor::forward_head(const float* x, int rows, float* logits) {
  QF_REQUIRE(rows > 0 && rows <= kChunkRows, "forward_head: ", rows, " rows (1..", kChunkRows, ")");
  std::copy_n(x, static_cast<std::size_t>(rows) * config_.dim, x_.data());
  if (logits != nullptr) {
    head(0, rows, logits);
    return;
  }
  logits_.resize(static_cast<std::size_t>(rows) * config_.vocab_size);
  head(0, rows, logits_.data());
}

std::span<const float> LlamaExecutor::forward_batch(std::span<const BatchToken> batch) {
  const int count = static_cast<int>(batch.size());
  QF_REQUIRE(count > 0, "forward_batch: no rows");
  int wanted = 0;
  for (const BatchToken& row : batch) {
    QF_REQUIRE(row.sequence >= 0 && row.sequence < sequences_, "forward_batch: sequence ",
               row.sequence, " (the executor holds ", sequences_, ")");
    QF_REQUIRE(row.position >= 0 && row.position < positions_, "forward_batch: position ",
               row.position, " exceeds the context of ", positions_);
    wanted += row.logits ? 1 : 0;
  }
  const auto vocab = static_cast<std::size_t>(config_.vocab_size);
  logits_.resize(static_cast<std::size_t>(wanted) * vocab);
  float* out = logits_.data();
  for (int done = 0; done < count; done += kChunkRows) {
    const int rows = std::min(kChunkRows, count - done);
    int selected = 0;
    for (int r = 0; r < rows; ++r) {
      const BatchToken& row = batch[static_cast<std::size_t>(done + r)];
      batch_tokens_[static_cast<std::size_t>(r)] = row.token;
      set_row(r, row.sequence, row.position);
    }
    embed_rows(std::span(batch_tokens_.data(), static_cast<std::size_t>(rows)), x_.data());
    for (int l = 0; l < config_.n_layers; ++l) block(l, rows);
    // The rows that want logits, moved to the front of x_ in order, through the head.
    for (int r = 0; r < rows; ++r) {
      if (!batch[static_cast<std::size_t>(done + r)].logits) continue;
      if (selected != r)
        std::copy_n(x_.data() + std::size_t(r) * config_.dim, config_.dim,
                    x_.data() + std::size_t(selected) * config_.dim);
      ++selected;
    }
    if (selected == 0) continue;
    head(0, selected, out);
    out += static_cast<std::size_t>(selected) * vocab;
  }
  return logits_;
}

void LlamaExecutor::set_row(int r, int sequence, int position) {
  row_positions_[static_cast<std::size_t>(r)] = position;
  row_sequences_[static_cast<std::size_t>(r)] = sequence;
  rope_rotation(rotations_.data() + std::size_t(r) * config_.rope_dim, position, config_);
}

void LlamaExecutor::block(int l, int rows) {
  const LlamaConfig& c = config_;
  const int dim = c.dim;
  LayerWeights& layer = weights_.layers[static_cast<std::size_t>(l)];
  normalized_linear(*layer.wqkv, l, LinearSite::qkv, x_.data(), rows, layer.attn_norm.data(),
                    qkv_.data(), qkv_columns_);
  // row r of qkv: [ q (dim) | k (kv_dim) | v (kv_dim) ]
  cache_.begin_rows(l);
  for (int r = 0; r < rows; ++r) {
    float* q = qkv_.data() + std::size_t(r) * qkv_columns_;
    float* k = q + dim;
    if (!layer.qkv_bias.empty()) {
      for (int i = 0; i < qkv_columns_; ++i) q[i] += layer.qkv_bias[static_cast<std::size_t>(i)];
    }
    const float* rotation = rotations_.data() + std::size_t(r) * c.rope_dim;
    rope(q, dim, rotation, c);
    rope(k, c.kv_dim(), rotation, c);
    cache_.store(l, row_sequences_[std::size_t(r)], row_positions_[std::size_t(r)], k,
                 k + c.kv_dim());
  }
  attention(l, rows);
  cache_.end_rows(l);
  observe(l, LinearSite::wo, xb_.data(), rows, dim);
  layer.wo->forward(xb_.data(), rows, dim, x_.data(), dim, pool_);
  normalized_linear(*layer.gate_up, l, LinearSite::gate_up, x_.data(), rows, layer.ffn_norm.data(),
                    hb_.data(), c.hidden_dim);
  observe(l, LinearSite::down, hb_.data(), rows, c.hidden_dim);
  layer.down->forward(hb_.data(), rows, c.hidden_dim, x_.data(), dim, pool_);
}

void LlamaExecutor::head(int first, int rows, float* logits) {
  const LlamaConfig& c = config_;
  const int dim = c.dim;
  normalized_linear(*weights_.classifier, -1, LinearSite::classifier,
                    x_.data() + std::size_t(first) * dim, rows - first, weights_.output_norm.data(),
                    logits, c.vocab_size);
}

// rows of x through RMSNorm(norm_weight) into `layer`. An observer sees the normalized
// rows, so they are written to xb_ first; without one the layer fuses the norm into its
// input (the int8 layers quantize each row as it is normalized).
void LlamaExecutor::normalized_linear(LinearLayer& layer, int l, LinearSite site, const float* x,
                                      int rows, const float* norm_weight, float* out, int ldc) {
  const int dim = config_.dim;
  const RmsNorm norm{norm_weight, config_.rms_eps};
  if (observer_ == nullptr) {
    layer.forward_normalized(x, rows, dim, norm, xb_.data(), out, ldc, pool_);
    return;
  }
  for (int r = 0; r < rows; ++r)
    rmsnorm(xb_.data() + std::size_t(r) * dim, x + std::size_t(r) * dim, norm, dim);
  observe(l, site, xb_.data(), rows, dim);
  layer.forward(xb_.data(), rows, dim, out, ldc, pool_);
}

// xb[r][h * head_dim ..] = sum_t softmax_t(q_r . k_t / sqrt(head_dim)) v_t over t <= start + r.
//
// The heads that share a kv head (a GQA group) are taken together, a block of cached
// positions at a time, so each block of k (then v) rows comes from memory once and from
// L1 for the group's other heads:
//
//   for block of positions [p0, p0 + B):        k rows p0.. (B x head_dim floats, in L1)
//     for head h of the group: scores_h[p0..] = q_h . k_p / sqrt(head_dim)
//   softmax each scores_h over [0, last]
//   for block of positions [p0, p0 + B):        v rows p0..
//     for head h of the group: out_h += sum_p scores_h[p] v_p
//
// Blocks start at multiples of 4 positions, so dot_rows groups positions as one call
// over all of them would, and weighted_rows adds them in order: the same floats.
// Work items are (row, kv head, slice of the group's heads), dealt to the pool's threads
// in turn (a prompt's later rows attend to more positions, so contiguous ranges would
// give the last thread the most work); the group is sliced only when there are fewer
// (row, kv head) pairs than threads.
void LlamaExecutor::attention(int layer, int rows) {
  const LlamaConfig& c = config_;
  const int head_dim = c.head_dim, group = c.kv_group(), kv_heads = c.n_kv_heads;
  const int threads = pool_.size();
  const int pairs = rows * kv_heads;
  const int slices = std::clamp((threads + pairs - 1) / pairs, 1, group);
  const int items = pairs * slices;
  const int block = attention_block_positions();
  const float scale = std::sqrt(static_cast<float>(head_dim));
  pool_.run([&](int t) {
    float* scores = scores_.data() + std::size_t(t) * group * positions_;
    for (int item = t; item < items; item += threads) {
      const int r = item / (kv_heads * slices);
      const int kv_head = item / slices % kv_heads, slice = item % slices;
      const int first = kv_head * group + group * slice / slices;  // this slice's heads
      const int heads = group * (slice + 1) / slices - group * slice / slices;
      const int count = row_positions_[std::size_t(r)] + 1;
      // A kv head's cached rows of the row's sequence, head_dim floats apart (kv_cache.h).
      const int sequence = row_sequences_[std::size_t(r)], position = count - 1;
      const KvRows keys = cache_.keys(layer, kv_head, sequence, position);
      const KvRows values = cache_.values(layer, kv_head, sequence, position);
      const float* q = qkv_.data() + std::size_t(r) * qkv_columns_ + first * head_dim;
      float* out = xb_.data() + std::size_t(r) * c.dim + first * head_dim;
      auto head_scores = [&](int h) { return scores + std::size_t(h) * positions_; };
      // A block of bf16 / int8 rows is decoded to f32 once and read by every head of the
      // group from L1 (widening it in each head's loop would cost group times as much).
      float* decoded = decoded_.data() + std::size_t(t) * block * head_dim;
      auto rows_of = [&](const KvRows& rows, int p0, int n) {
        if (rows.type == KvType::f32) return rows.from(p0);
        decode_rows(rows.from(p0), n, head_dim, decoded);
        return KvRows{KvType::f32, decoded, nullptr, head_dim};
      };
      if (keys.channel_scales != nullptr) {  // int8 keys: integer q.k, no decoding
        for (int h = 0; h < heads; ++h)
          dot_rows_int8_keys(q + h * head_dim, keys, count, head_dim, scale, head_scores(h));
      } else {
        for (int p0 = 0; p0 < count; p0 += block) {
          const int n = std::min(block, count - p0);
          const KvRows k = rows_of(keys, p0, n);
          for (int h = 0; h < heads; ++h)
            dot_rows(q + h * head_dim, k, n, head_dim, scale, head_scores(h) + p0);
        }
      }
      for (int h = 0; h < heads; ++h) softmax(head_scores(h), count);
      for (int p0 = 0; p0 < count; p0 += block) {
        const int n = std::min(block, count - p0);
        const KvRows v = rows_of(values, p0, n);
        for (int h = 0; h < heads; ++h)
          weighted_rows(head_scores(h) + p0, v, n, head_dim, /*accumulate=*/p0 > 0,
                        out + h * head_dim);
      }
    }
  });
}

// Positions per attention block: 16 KiB of k (or v) rows, half of a typical L1, a
// multiple of 4 positions.
int LlamaExecutor::attention_block_positions() const {
  constexpr int kBlockBytes = 16 << 10;
  const int rows = kBlockBytes / (config_.head_dim * static_cast<int>(sizeof(float)));
  return std::max(4, rows / 4 * 4);
}

}  // namespace qforge
