// Text generation as llama2.c's run.c does it, with the prompt run as one batch:
//
//   tokens = encode_prompt(prompt)              BOS as the vocabulary asks; "" -> BOS only
//   logits = forward(tokens, 0)                 prefill, one batch per chunk
//   repeat: next = sample(logits); stop at BOS, EOS or end of turn;
//           emit decode(previous, next) through a Utf8Stream;
//           logits = forward(next, position++)  decode, one row
//
// The prompt's own pieces are emitted first, as run.c prints them.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "model/runtime/llama_executor.h"
#include "model/runtime/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

struct GenerationStats {
  int prompt_tokens = 0;     // including BOS
  int generated_tokens = 0;  // sampled tokens emitted
  int decode_steps = 0;      // one-token forwards (sampled tokens fed back)
  double prefill_seconds = 0;
  double decode_seconds = 0;       // from the first sample to the last
  std::vector<int> generated;      // the emitted tokens
  int stop_token = -1;             // the EOS / end-of-turn / BOS token that ended it, or -1
  bool stopped_by_caller = false;  // GenerationOutput::on_token returned false
  int next_position = 0;           // the first cache position not yet filled

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerationOutput {
  std::function<void(std::string_view)> on_text;
  bool echo_prompt = false;  // emit the prompt's own pieces first
  // Called after each sampled token's text went to on_text; false stops generation there
  // (the token counts as generated, and is not fed back). Empty: never stops.
  std::function<bool(int token)> on_token;
};

// Runs `tokens` at cache positions [start, start + size) (the cache already holding the
// positions before `start`, as a chat's earlier turns), then samples up to
// `max_new_tokens` tokens, feeding each back, until a token ends generation. The stop
// token itself is neither emitted nor fed.
GenerationStats continue_generation(LlamaExecutor& executor, const Tokenizer& tokenizer,
                                    Sampler& sampler, std::span<const int> tokens, int start,
                                    int max_new_tokens, const GenerationOutput& out);

// Generates up to `max_new_tokens` tokens (fewer when the context runs out); `on_text`
// receives the text as printable, well-formed UTF-8 (utf8_stream.h), in pieces.
GenerationStats generate(LlamaExecutor& executor, const Tokenizer& tokenizer, Sampler& sampler,
                         std::string_view prompt, int max_new_tokens,
                         const std::function<void(std::string_view)>& on_text);

}  // namespace qforge
