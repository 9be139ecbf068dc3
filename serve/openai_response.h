// The JSON qforge answers with, in OpenAI's shapes:
//
//   completion   {"id": "cmpl-..", "object": "text_completion", "created", "model",
//                 "choices": [{"index": 0, "text", "finish_reason", "logprobs": null}], "usage"}
//   chat         {"id": "chatcmpl-..", "object": "chat.completion", ..., "choices":
//                 [{"index": 0, "message": {"role": "assistant", "content"}, "finish_reason"}]}
//   stream       one chunk per piece of text ("text_completion" / "chat.completion.chunk",
//                chat: "delta": {"role"} first, then {"content"}), the last with the
//                finish_reason and the usage; each sent as "data: <json>\n\n", then
//                "data: [DONE]\n\n"
//   error        {"error": {"message", "type", "param", "code"}}
#pragma once

#include <cstdint>
#include <string>

#include "serve/api_error.h"
#include "serve/openai_request.h"
#include "serve/request_channel.h"

namespace qforge::serve {

struct ResponseIds {
  std::string id;        // "cmpl-7" / "chatcmpl-7"
  std::int64_t created;  // Unix seconds
  std::string model;
};

std::string response_json(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                          const GenerationResult& result);
// One streamed chunk: text (may be empty), and when `result` is given the finish_reason and
// usage; `first` adds the chat delta's role.
std::string chunk_json(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                       const GenerationResult* result, bool first);
std::string error_json(const ApiError& error);
std::string server_sent_event(const std::string& data);  // "data: <data>\n\n"

}  // namespace qforge::serve
