// What one request's generation hands to the connection that waits for it. The engine
// thread writes, the HTTP thread reads, and neither waits for the other's I/O: a client
// that reads slowly (or not at all) never stalls the batch the others share.
//
//   engine thread:  push_text("Once") push_text(" upon") ... finish(result)
//   HTTP thread:    wait_next() -> {"Once upon", no result yet} ... -> {"", result}
//                   cancel()  when the client has gone: the engine frees the slot
//                             at its next step
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

namespace qforge::serve {

enum class FinishReason { stop, length, cancelled, error };
const char* finish_reason_name(FinishReason reason);  // "stop", "length", ...

struct GenerationResult {
  FinishReason reason = FinishReason::stop;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  double seconds_to_first_token = 0;  // from submission to the first sampled token
  std::string error;                  // reason == error
};

struct ChannelRead {
  std::string text;                        // everything pushed since the last read
  std::optional<GenerationResult> result;  // set once generation has ended
};

class RequestChannel {
 public:
  // Engine side.
  void push_text(std::string_view text);
  void finish(const GenerationResult& result);
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // HTTP side: waits up to `timeout` for text or the end, then takes what is there.
  ChannelRead wait_next(std::chrono::milliseconds timeout);
  // Waits for the end and returns all text and the result.
  ChannelRead wait_all();
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string text_;
  std::optional<GenerationResult> result_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace qforge::serve
