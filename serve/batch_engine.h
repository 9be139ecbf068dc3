// Continuous batching: N slots share one executor, each slot its own sequence (its own KV
// region); one engine thread runs every active slot forward together, step after step.
//
//   queue (bounded) --admit--> slots [0 .. N)          one step:
//                                slot 0  decoding      row: its last token at its position
//                                slot 1  prefilling    rows: the next <= prefill_rows prompt
//                                slot 2  free                tokens (logits on the last one)
//   rows of every slot --> LlamaExecutor::forward_batch (M = rows: one weight stream)
//   each slot with logits: sample -> UTF-8 -> stop strings -> its RequestChannel
//
// A row's logits do not depend on what else is in the batch (forward_batch), and each slot
// samples with its own Sampler, so a request gets the text it would get alone. A long
// prompt is prefilled a chunk per step beside the others' decodes, so it delays them by one
// chunk's time per step, never by its whole length. A request whose client has gone
// (RequestChannel::cancel) leaves its slot at the next step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/runtime/llama_executor.h"
#include "model/runtime/sampler.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/utf8_stream.h"
#include "serve/request_channel.h"
#include "serve/stop_strings.h"

namespace qforge::serve {

struct EngineRequest {
  std::vector<int> prompt;  // at least one token, at most the context
  int max_tokens = 16;
  SamplerOptions sampling;
  std::vector<std::string> stop;
  std::shared_ptr<RequestChannel> channel;
};

struct EngineOptions {
  int queue_limit = 16;                          // requests waiting for a slot; more are refused
  int prefill_rows = LlamaExecutor::kChunkRows;  // prompt rows per step beside the decodes
};

// Time to first token buckets (seconds), Prometheus-style upper bounds (+Inf implied).
inline constexpr double kFirstTokenBuckets[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};

struct EngineMetrics {
  int slots = 0;
  int active_slots = 0;
  int queue_depth = 0;
  std::uint64_t requests_finished = 0;  // ended by a stop or the length
  std::uint64_t requests_cancelled = 0;
  std::uint64_t requests_failed = 0;
  std::uint64_t prompt_tokens = 0;
  std::uint64_t generated_tokens = 0;
  std::uint64_t steps = 0;
  double busy_seconds = 0;  // time spent in forward steps
  std::uint64_t first_token_counts[std::size(kFirstTokenBuckets) + 1] = {};  // last: +Inf
  double first_token_seconds_sum = 0;
  std::uint64_t first_token_count = 0;
  double decode_tokens_per_second() const {
    return busy_seconds > 0 ? double(generated_tokens) / busy_seconds : 0.0;
  }
};

class BatchEngine {
 public:
  // `executor` (its sequences() are the slots) and `tokenizer` must outlive the engine.
  BatchEngine(LlamaExecutor& executor, const Tokenizer& tokenizer, EngineOptions options = {});
  ~BatchEngine();
  BatchEngine(const BatchEngine&) = delete;
  BatchEngine& operator=(const BatchEngine&) = delete;

  enum class Admission { accepted, queue_full, stopped };
  // Queues the request; its channel receives the text and, once, the result. A prompt that
  // does not fit the context ends at once with an error result.
  Admission submit(EngineRequest request);
  // Ends every queued and running request (result: cancelled) and joins the engine thread.
  void stop();

  EngineMetrics metrics() const;
  int slots() const { return static_cast<int>(slots_.size()); }
  int context() const { return executor_.positions(); }

 private:
  using Clock = std::chrono::steady_clock;
  struct Queued {
    EngineRequest request;
    Clock::time_point submitted;
  };
  struct Slot {
    bool active = false;
    EngineRequest request;
    Clock::time_point submitted;
    std::optional<Sampler> sampler;
    std::optional<StopStrings> stops;
    Utf8Stream utf8;
    int prefilled = 0;   // prompt tokens in the cache
    int position = 0;    // the next cache position
    int next_token = 0;  // the sampled token the next step feeds (decoding)
    int previous = 0;    // the token before it (for decode's leading-space rule)
    int generated = 0;
    int budget = 0;  // most tokens it may sample
    bool first_token_seen = false;
    double first_token_seconds = 0;
    bool decoding() const { return prefilled == static_cast<int>(request.prompt.size()); }
  };

  void run();
  void admit_locked();
  void step();
  void sample(Slot& slot, std::span<const float> logits);
  void end(Slot& slot, FinishReason reason, const std::string& error = "");

  LlamaExecutor& executor_;
  const Tokenizer& tokenizer_;
  EngineOptions options_;
  std::vector<Slot> slots_;
  std::vector<BatchToken> rows_;
  std::vector<int> row_slots_;  // per row that wants logits: its slot
  std::vector<float> scratch_;

  mutable std::mutex mutex_;  // guards queue_, stopping_, metrics_, and slots_' active flags
  std::condition_variable wake_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  EngineMetrics metrics_;
  std::thread thread_;
};

}  // namespace qforge::serve
