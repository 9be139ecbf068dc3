#include "serve/openai_request.h"

#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

namespace qforge::serve {
namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(const std::string& field, const json& v, const char* wanted) {
  throw invalid_request(field, "'" + field + "' must be " + wanted + ", not " + type_name(v));
}

std::string string_field(const std::string& field, const json& v) {
  if (!v.is_string()) wrong_type(field, v, "a string");
  return v.get<std::string>();
}

double number_field(const std::string& field, const json& v, double low, double high) {
  if (!v.is_number()) wrong_type(field, v, "a number");
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < low || x > high)
    throw invalid_request(field, "'" + field + "' is " + v.dump() + "; it must lie in [" +
                                     json(low).dump() + ", " + json(high).dump() + "]");
  return x;
}

long long integer_field(const std::string& field, const json& v, long long low, long long high) {
  if (!v.is_number_integer()) wrong_type(field, v, "an integer");
  const long long x = v.get<long long>();
  if (x < low || x > high)
    throw invalid_request(field, "'" + field + "' is " + std::to_string(x) + "; it must lie in [" +
                                     std::to_string(low) + ", " + std::to_string(high) + "]");
  return x;
}

std::vector<std::string> stop_field(const json& v) {
  if (v.is_null()) return {};
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) wrong_type("stop", v, "a string or an array of strings");
  if (v.size() > 4) throw invalid_request("stop", "'stop' holds at most 4 strings");
  std::vector<std::string> out;
  for (const json& s : v) out.push_back(string_field("stop", s));
  return out;
}

std::string message_content(std::size_t i, const json& v) {
  const std::string field = "messages[" + std::to_string(i) + "].content";
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) wrong_type(field, v, "a string or an array of text parts");
  std::string text;
  for (const json& part : v) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text"))
      throw invalid_request(field,
                            "'" + field + "' parts must be {\"type\": \"text\", \"text\": ...}");
    text += string_field(field + ".text", part["text"]);
  }
  return text;
}

std::vector<ChatMessage> messages_field(const json& v) {
  if (!v.is_array()) wrong_type("messages", v, "an array");
  if (v.empty()) throw invalid_request("messages", "'messages' is empty");
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    const json& m = v[i];
    if (!m.is_object()) wrong_type(field, m, "an object");
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content" && key != "name")
        throw invalid_request(field + "." + key, "unknown field '" + field + "." + key + "'");
    if (!m.contains("role"))
      throw invalid_request(field + ".role", "'" + field + ".role' is missing");
    if (!m.contains("content"))
      throw invalid_request(field + ".content", "'" + field + ".content' is missing");
    ChatMessage message{string_field(field + ".role", m["role"]), message_content(i, m["content"])};
    if (message.role != "system" && message.role != "user" && message.role != "assistant")
      throw invalid_request(field + ".role", "'" + field + ".role' is '" + message.role +
                                                 "'; qforge takes system, user and assistant");
    out.push_back(std::move(message));
  }
  return out;
}

// Fields OpenAI clients send that change nothing at these values.
void neutral_field(const std::string& key, const json& v) {
  if (key == "user") {
    string_field(key, v);
  } else if (key == "stream_options") {
    if (!v.is_null() && !v.is_object()) wrong_type(key, v, "an object");
  } else if (key == "presence_penalty" || key == "frequency_penalty") {
    if (!v.is_null() && number_field(key, v, -2, 2) != 0)
      throw invalid_request(key, "'" + key + "' other than 0 is not supported");
  } else if (key == "logprobs" || key == "top_logprobs" || key == "echo" || key == "suffix" ||
             key == "logit_bias") {
    const bool off = v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
                     (v.is_number_integer() && v.get<long long>() == 0) ||
                     (v.is_object() && v.empty());
    if (!off) throw invalid_request(key, "'" + key + "' is not supported");
  } else if (key == "n" || key == "best_of") {
    if (!v.is_null() && integer_field(key, v, 1, 1 << 30) != 1)
      throw invalid_request(key, "'" + key + "' must be 1: one choice per request");
  } else {
    throw invalid_request(key, "unknown field '" + key + "'");
  }
}

}  // namespace

OpenAiRequest parse_openai_request(std::string_view body, Endpoint endpoint) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw invalid_request("", "the request body is not valid JSON");
  if (!j.is_object()) throw invalid_request("", "the request body must be a JSON object");
  OpenAiRequest r;
  r.endpoint = endpoint;
  const std::string main_field = endpoint == Endpoint::chat ? "messages" : "prompt";
  if (!j.contains(main_field)) throw invalid_request(main_field, "'" + main_field + "' is missing");
  for (const auto& [key, v] : j.items()) {
    if (key == "model") {
      r.model = string_field(key, v);
    } else if (key == main_field && endpoint == Endpoint::completions) {
      if (v.is_array() && v.size() == 1 && v[0].is_string()) {
        r.prompt = v[0].get<std::string>();
      } else if (v.is_array()) {
        throw invalid_request(key, "'prompt' as an array must hold exactly one string");
      } else {
        r.prompt = string_field(key, v);
      }
    } else if (key == main_field) {
      r.messages = messages_field(v);
    } else if (key == "max_tokens" ||
               (key == "max_completion_tokens" && endpoint == Endpoint::chat)) {
      if (v.is_null()) continue;
      r.max_tokens = static_cast<int>(integer_field(key, v, 1, 1 << 30));
      r.max_tokens_given = true;
    } else if (key == "temperature") {
      if (!v.is_null()) r.temperature = static_cast<float>(number_field(key, v, 0, 2));
    } else if (key == "top_p") {
      if (!v.is_null()) r.top_p = static_cast<float>(number_field(key, v, 0, 1));
      if (r.top_p == 0) throw invalid_request(key, "'top_p' must be above 0");
    } else if (key == "top_k") {
      if (!v.is_null()) r.top_k = static_cast<int>(integer_field(key, v, 0, 1 << 30));
    } else if (key == "seed") {
      if (!v.is_null())
        r.seed = static_cast<std::uint64_t>(integer_field(
            key, v, std::numeric_limits<long long>::min(), std::numeric_limits<long long>::max()));
    } else if (key == "stop") {
      r.stop = stop_field(v);
    } else if (key == "stream") {
      if (!v.is_boolean()) wrong_type(key, v, "a boolean");
      r.stream = v.get<bool>();
    } else {
      neutral_field(key, v);
    }
  }
  return r;
}

}  // namespace qforge::serve
