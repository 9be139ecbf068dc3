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
#include <string_view>

#include "model/llama_executor.h"
#include "model/sampler.h"
#include "model/tokenizer/tokenizer.h"

namespace qforge {

struct GenerationStats {
  int prompt_tokens = 0;     // including BOS
  int generated_tokens = 0;  // sampled tokens emitted
  int decode_steps = 0;      // one-token forwards (sampled tokens fed back)
  double prefill_seconds = 0;
  double decode_seconds = 0;  // from the first sample to the last

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

// Generates up to `max_new_tokens` tokens (fewer when the context runs out); `on_text`
// receives the text as printable, well-formed UTF-8 (utf8_stream.h), in pieces.
GenerationStats generate(LlamaExecutor& executor, const Tokenizer& tokenizer, Sampler& sampler,
                         std::string_view prompt, int max_new_tokens,
                         const std::function<void(std::string_view)>& on_text);

}  // namespace qforge
