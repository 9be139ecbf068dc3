#include "model/runtime/generation.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "jit/base/error.h"
#include "model/tokenizer/utf8_stream.h"

namespace qforge {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0.0;
}

double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? decode_steps / decode_seconds : 0.0;
}

GenerationStats continue_generation(LlamaExecutor& executor, const Tokenizer& tokenizer,
                                    Sampler& sampler, std::span<const int> tokens, int start,
                                    int max_new_tokens, const GenerationOutput& out) {
  const int prompt_tokens = static_cast<int>(tokens.size());
  QF_REQUIRE(prompt_tokens >= 1, "generation: nothing to start from (no tokens)");
  QF_REQUIRE(start >= 0 && start + prompt_tokens <= executor.positions(), "prompt: ", prompt_tokens,
             " tokens at position ", start, " do not fit the context of ", executor.positions());
  GenerationStats stats;
  stats.prompt_tokens = prompt_tokens;
  stats.next_position = start;
  Utf8Stream text;
  const auto emit = [&](std::string_view piece) {
    if (const std::string s = text.push(piece); !s.empty() && out.on_text) out.on_text(s);
  };
  if (out.echo_prompt) {
    for (int i = 0; i < prompt_tokens; ++i)
      emit(tokenizer.decode(i > 0 ? tokens[i - 1] : -1, tokens[i]));
  }
  const auto finish = [&] {
    if (const std::string s = text.finish(); !s.empty() && out.on_text) out.on_text(s);
  };
  // Each sampled token but the last is fed back at the next position.
  const int budget = std::min(max_new_tokens, executor.positions() - start - prompt_tokens + 1);
  if (budget <= 0) {
    finish();
    return stats;
  }

  auto clock = std::chrono::steady_clock::now();
  std::span<const float> logits = executor.forward(tokens, start);
  stats.prefill_seconds = seconds_since(clock);
  stats.next_position = start + prompt_tokens;
  std::vector<float> scratch;
  int previous = tokens.back();
  clock = std::chrono::steady_clock::now();
  for (int position = start + prompt_tokens;; ++position) {
    scratch.assign(logits.begin(), logits.end());
    const int next = sampler.sample(scratch);
    if (next == tokenizer.bos_id() || tokenizer.ends_generation(next)) {
      stats.stop_token = next;
      break;
    }
    emit(tokenizer.decode(previous, next));
    stats.generated.push_back(next);
    previous = next;
    ++stats.generated_tokens;
    if (out.on_token && !out.on_token(next)) {
      stats.stopped_by_caller = true;
      break;
    }
    if (stats.generated_tokens == budget) break;
    logits = executor.forward(std::span<const int>(&next, 1), position);
    ++stats.decode_steps;
    stats.next_position = position + 1;
  }
  stats.decode_seconds = seconds_since(clock);
  finish();
  return stats;
}

GenerationStats generate(LlamaExecutor& executor, const Tokenizer& tokenizer, Sampler& sampler,
                         std::string_view prompt, int max_new_tokens,
                         const std::function<void(std::string_view)>& on_text) {
  std::vector<int> tokens = tokenizer.encode_prompt(prompt);
  if (tokens.empty()) tokens.push_back(tokenizer.bos_id());  // something to start from
  return continue_generation(executor, tokenizer, sampler, tokens, 0, max_new_tokens,
                             {on_text, /*echo_prompt=*/true, {}});
}

}  // namespace qforge
