#include "serve/openai_response.h"

#include <nlohmann/json.hpp>

namespace qforge::serve {
namespace {

using nlohmann::json;

json usage_of(const GenerationResult& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.completion_tokens},
          {"total_tokens", r.prompt_tokens + r.completion_tokens}};
}

json envelope(const ResponseIds& ids, const char* object) {
  return {{"id", ids.id}, {"object", object}, {"created", ids.created}, {"model", ids.model}};
}

// Invalid UTF-8 never reaches here (Utf8Stream), but dump() must not throw on it.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string response_json(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                          const GenerationResult& result) {
  const char* finish = finish_reason_name(result.reason);
  json j;
  if (endpoint == Endpoint::chat) {
    j = envelope(ids, "chat.completion");
    j["choices"] = json::array({{{"index", 0},
                                 {"message", {{"role", "assistant"}, {"content", text}}},
                                 {"finish_reason", finish},
                                 {"logprobs", nullptr}}});
  } else {
    j = envelope(ids, "text_completion");
    j["choices"] = json::array(
        {{{"index", 0}, {"text", text}, {"finish_reason", finish}, {"logprobs", nullptr}}});
  }
  j["usage"] = usage_of(result);
  return dump(j);
}

std::string chunk_json(Endpoint endpoint, const ResponseIds& ids, const std::string& text,
                       const GenerationResult* result, bool first) {
  json finish = result ? json(finish_reason_name(result->reason)) : json(nullptr);
  json j;
  if (endpoint == Endpoint::chat) {
    j = envelope(ids, "chat.completion.chunk");
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = text;
    j["choices"] = json::array({{{"index", 0}, {"delta", delta}, {"finish_reason", finish}}});
  } else {
    j = envelope(ids, "text_completion");
    j["choices"] = json::array(
        {{{"index", 0}, {"text", text}, {"finish_reason", finish}, {"logprobs", nullptr}}});
  }
  if (result) j["usage"] = usage_of(*result);
  return dump(j);
}

std::string error_json(const ApiError& error) {
  json e = {{"message", error.what()},
            {"type", error.type},
            {"param", error.param.empty() ? json(nullptr) : json(error.param)},
            {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return dump(json{{"error", e}});
}

std::string server_sent_event(const std::string& data) {
  return "data: " + data + "\n\n";
}

}  // namespace qforge::serve
