// The body of POST /v1/completions and /v1/chat/completions, read and checked: every field
// has the type OpenAI gives it and a value qforge can honour, or the request is refused
// with a 400 naming the field (ApiError). Fields qforge does not know are refused too,
// except the few OpenAI clients send with neutral values (user, stream_options, zero
// penalties, logprobs off, n = 1).
//
//   completions  {"model", "prompt": "..." | ["..."], "max_tokens", "temperature",
//                 "top_p", "top_k", "seed", "stop": "..." | [...], "n", "stream", ...}
//   chat         {"model", "messages": [{"role", "content": "..." | [{"type": "text",
//                 "text"}]}], "max_tokens" | "max_completion_tokens", the same sampling}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/runtime/chat_format.h"
#include "serve/api_error.h"

namespace qforge::serve {

enum class Endpoint { completions, chat };

struct OpenAiRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;                  // "" when the request named none
  std::string prompt;                 // completions
  std::vector<ChatMessage> messages;  // chat
  int max_tokens = 16;                // chat: the context's remainder unless given
  bool max_tokens_given = false;
  float temperature = 1.f;
  float top_p = 1.f;
  int top_k = 0;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
};

// Throws ApiError (400) for malformed JSON, a wrong type, a value out of range or an
// unknown field.
OpenAiRequest parse_openai_request(std::string_view body, Endpoint endpoint);

}  // namespace qforge::serve
