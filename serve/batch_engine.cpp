#include "serve/batch_engine.h"

#include <algorithm>
#include <exception>

namespace qforge::serve {
namespace {

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

BatchEngine::BatchEngine(LlamaExecutor& executor, const Tokenizer& tokenizer, EngineOptions options)
    : executor_(executor),
      tokenizer_(tokenizer),
      options_(options),
      slots_(static_cast<std::size_t>(executor.sequences())) {
  options_.prefill_rows = std::max(1, options_.prefill_rows);
  options_.queue_limit = std::max(0, options_.queue_limit);
  metrics_.slots = slots();
  thread_ = std::thread([this] { run(); });
}

BatchEngine::~BatchEngine() {
  stop();
}

BatchEngine::Admission BatchEngine::submit(EngineRequest request) {
  const int length = static_cast<int>(request.prompt.size());
  if (length < 1 || length > context()) {
    GenerationResult result;
    result.reason = FinishReason::error;
    result.prompt_tokens = length;
    result.error = "the prompt has " + std::to_string(length) + " tokens; the context holds " +
                   std::to_string(context());
    request.channel->finish(result);
    return Admission::accepted;
  }
  {
    const std::lock_guard lock(mutex_);
    if (stopping_) return Admission::stopped;
    // Everything admitted or waiting, against the slots plus the queue.
    if (static_cast<int>(queue_.size()) + metrics_.active_slots >= slots() + options_.queue_limit)
      return Admission::queue_full;
    queue_.push_back({std::move(request), Clock::now()});
    metrics_.queue_depth = static_cast<int>(queue_.size());
  }
  wake_.notify_all();
  return Admission::accepted;
}

void BatchEngine::stop() {
  {
    const std::lock_guard lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineMetrics BatchEngine::metrics() const {
  const std::lock_guard lock(mutex_);
  return metrics_;
}

void BatchEngine::run() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || metrics_.active_slots > 0; });
      if (stopping_) break;
      admit_locked();
    }
    step();
  }
  // Shutting down: every request still queued or running ends as cancelled.
  std::deque<Queued> queued;
  {
    const std::lock_guard lock(mutex_);
    queued.swap(queue_);
    metrics_.queue_depth = 0;
  }
  for (Queued& q : queued) {
    GenerationResult result;
    result.reason = FinishReason::cancelled;
    result.prompt_tokens = static_cast<int>(q.request.prompt.size());
    q.request.channel->finish(result);
  }
  for (Slot& slot : slots_)
    if (slot.active) end(slot, FinishReason::cancelled);
}

void BatchEngine::admit_locked() {
  for (int s = 0; s < slots() && !queue_.empty(); ++s) {
    Slot& slot = slots_[static_cast<std::size_t>(s)];
    if (slot.active) continue;
    Queued q = std::move(queue_.front());
    queue_.pop_front();
    if (q.request.channel->cancelled()) {  // gone while it waited
      GenerationResult result;
      result.reason = FinishReason::cancelled;
      q.request.channel->finish(result);
      ++metrics_.requests_cancelled;
      --s;
      continue;
    }
    slot = Slot{};
    slot.active = true;
    slot.request = std::move(q.request);
    slot.submitted = q.submitted;
    slot.sampler.emplace(slot.request.sampling);
    slot.stops.emplace(slot.request.stop);
    const int length = static_cast<int>(slot.request.prompt.size());
    // As continue_generation: each sampled token but the last is fed back.
    slot.budget = std::min(slot.request.max_tokens, context() - length + 1);
    slot.previous = slot.request.prompt.back();
    metrics_.prompt_tokens += static_cast<std::uint64_t>(length);
    ++metrics_.active_slots;
  }
  metrics_.queue_depth = static_cast<int>(queue_.size());
}

void BatchEngine::step() {
  for (Slot& slot : slots_)
    if (slot.active && slot.request.channel->cancelled()) end(slot, FinishReason::cancelled);
  for (Slot& slot : slots_)
    if (slot.active && slot.budget <= 0) end(slot, FinishReason::length);

  // Decodes first (one row each), then prompt chunks within the step's prefill rows.
  rows_.clear();
  row_slots_.clear();
  for (int s = 0; s < slots(); ++s) {
    const Slot& slot = slots_[static_cast<std::size_t>(s)];
    if (!slot.active || !slot.decoding()) continue;
    rows_.push_back({slot.next_token, s, slot.position, true});
    row_slots_.push_back(s);
  }
  int prefill = options_.prefill_rows;
  for (int s = 0; s < slots() && prefill > 0; ++s) {
    const Slot& slot = slots_[static_cast<std::size_t>(s)];
    if (!slot.active || slot.decoding()) continue;
    const int length = static_cast<int>(slot.request.prompt.size());
    const int n = std::min(prefill, length - slot.prefilled);
    for (int i = 0; i < n; ++i) {
      const int p = slot.prefilled + i;
      const bool last = p == length - 1;
      rows_.push_back({slot.request.prompt[static_cast<std::size_t>(p)], s, p, last});
      if (last) row_slots_.push_back(s);
    }
    prefill -= n;
  }
  if (rows_.empty()) return;

  const auto start = Clock::now();
  std::span<const float> logits;
  try {
    logits = executor_.forward_batch(rows_);
  } catch (const std::exception& e) {
    for (Slot& slot : slots_)
      if (slot.active) end(slot, FinishReason::error, e.what());
    return;
  }
  // Advance every slot that had rows, then sample those that asked for logits.
  for (const BatchToken& row : rows_) {
    Slot& slot = slots_[static_cast<std::size_t>(row.sequence)];
    if (slot.decoding()) {
      slot.position = row.position + 1;
    } else {
      slot.prefilled = row.position + 1;
      slot.position = slot.prefilled;
    }
  }
  const auto vocab = static_cast<std::size_t>(executor_.vocab_size());
  for (std::size_t r = 0; r < row_slots_.size(); ++r) {
    Slot& slot = slots_[static_cast<std::size_t>(row_slots_[r])];
    sample(slot, logits.subspan(r * vocab, vocab));
  }
  const std::lock_guard lock(mutex_);
  ++metrics_.steps;
  metrics_.busy_seconds += seconds_between(start, Clock::now());
}

void BatchEngine::sample(Slot& slot, std::span<const float> logits) {
  scratch_.assign(logits.begin(), logits.end());
  const int next = slot.sampler->sample(scratch_);
  if (!slot.first_token_seen) {
    slot.first_token_seen = true;
    slot.first_token_seconds = seconds_between(slot.submitted, Clock::now());
  }
  if (next == tokenizer_.bos_id() || tokenizer_.ends_generation(next)) {
    end(slot, FinishReason::stop);
    return;
  }
  ++slot.generated;
  {
    const std::lock_guard lock(mutex_);
    ++metrics_.generated_tokens;
  }
  const std::string text = slot.stops->push(slot.utf8.push(tokenizer_.decode(slot.previous, next)));
  slot.request.channel->push_text(text);
  if (slot.stops->stopped()) {
    end(slot, FinishReason::stop);
    return;
  }
  slot.previous = next;
  slot.next_token = next;
  if (slot.generated >= slot.budget) end(slot, FinishReason::length);
}

void BatchEngine::end(Slot& slot, FinishReason reason, const std::string& error) {
  if (reason != FinishReason::cancelled && reason != FinishReason::error && !slot.stops->stopped())
    slot.request.channel->push_text(slot.stops->push(slot.utf8.finish()) + slot.stops->finish());
  GenerationResult result;
  result.reason = reason;
  result.prompt_tokens = static_cast<int>(slot.request.prompt.size());
  result.completion_tokens = slot.generated;
  result.seconds_to_first_token = slot.first_token_seconds;
  result.error = error;
  {
    const std::lock_guard lock(mutex_);
    --metrics_.active_slots;
    if (reason == FinishReason::cancelled)
      ++metrics_.requests_cancelled;
    else if (reason == FinishReason::error)
      ++metrics_.requests_failed;
    else
      ++metrics_.requests_finished;
    if (slot.first_token_seen) {
      std::size_t b = 0;
      while (b < std::size(kFirstTokenBuckets) && slot.first_token_seconds > kFirstTokenBuckets[b])
        ++b;
      ++metrics_.first_token_counts[b];
      metrics_.first_token_seconds_sum += slot.first_token_seconds;
      ++metrics_.first_token_count;
    }
  }
  slot.request.channel->finish(result);
  slot = Slot{};
}

}  // namespace qforge::serve
