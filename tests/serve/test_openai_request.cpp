// The request bodies of the OpenAI API: what is accepted, and every refusal naming its field.
#include <gtest/gtest.h>

#include <string>

#include "serve/openai_request.h"

namespace qforge {
namespace {

using serve::ApiError;
using serve::Endpoint;
using serve::parse_openai_request;

// The 400 a body gets, with the field it names.
std::string refused_field(const std::string& body, Endpoint endpoint = Endpoint::completions) {
  try {
    parse_openai_request(body, endpoint);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    return e.param;
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

TEST(OpenAiRequest, ReadsEveryCompletionField) {
  const serve::OpenAiRequest r = parse_openai_request(
      R"({"model": "m", "prompt": ["Once"], "max_tokens": 9, "temperature": 0.5, "top_p": 0.8,
          "top_k": 40, "seed": 7, "stop": ["a", "b"], "n": 1, "stream": true, "user": "u",
          "presence_penalty": 0, "logprobs": null, "stream_options": {"include_usage": true}})",
      Endpoint::completions);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.8f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(r.seed, 7u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  const serve::OpenAiRequest d =
      parse_openai_request(R"({"prompt": "x", "stop": "z"})", Endpoint::completions);
  EXPECT_EQ(d.max_tokens, 16);  // OpenAI's default
  EXPECT_FALSE(d.max_tokens_given);
  EXPECT_FLOAT_EQ(d.temperature, 1.f);
  EXPECT_FLOAT_EQ(d.top_p, 1.f);
  EXPECT_FALSE(d.seed.has_value());
  EXPECT_EQ(d.stop, std::vector<std::string>{"z"});
}

TEST(OpenAiRequest, ReadsChatMessagesAndTheirTextParts) {
  const serve::OpenAiRequest r = parse_openai_request(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                    {"type": "text", "text": "there"}]}],
          "max_completion_tokens": 5})",
      Endpoint::chat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.max_tokens, 5);
}

TEST(OpenAiRequest, RefusesMalformedBodiesNamingTheField) {
  EXPECT_EQ(refused_field("{not json"), "");
  EXPECT_EQ(refused_field("[1, 2]"), "");
  EXPECT_EQ(refused_field(R"({"max_tokens": 4})"), "prompt");
  EXPECT_EQ(refused_field(R"({"prompt": 5})"), "prompt");
  EXPECT_EQ(refused_field(R"({"prompt": ["a", "b"]})"), "prompt");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "max_tokens": "4"})"), "max_tokens");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "max_tokens": 0})"), "max_tokens");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "max_tokens": 2.5})"), "max_tokens");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "temperature": 3})"), "temperature");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "temperature": "hot"})"), "temperature");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "top_p": 0})"), "top_p");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "top_k": -1})"), "top_k");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "stop": ["1","2","3","4","5"]})"), "stop");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "stop": [1]})"), "stop");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "stream": "yes"})"), "stream");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "n": 2})"), "n");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "logprobs": 3})"), "logprobs");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "frequency_penalty": 0.5})"), "frequency_penalty");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "seed": "s"})"), "seed");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "model": 1})"), "model");
  EXPECT_EQ(refused_field(R"({"prompt": "a", "colour": "red"})"), "colour");
  EXPECT_EQ(refused_field(R"({"prompt": "a"})", Endpoint::chat), "messages");
  EXPECT_EQ(refused_field(R"({"messages": []})", Endpoint::chat), "messages");
  EXPECT_EQ(refused_field(R"({"messages": {}})", Endpoint::chat), "messages");
  EXPECT_EQ(refused_field(R"({"messages": [{"role": "robot", "content": "x"}]})", Endpoint::chat),
            "messages[0].role");
  EXPECT_EQ(refused_field(R"({"messages": [{"role": "user"}]})", Endpoint::chat),
            "messages[0].content");
  EXPECT_EQ(refused_field(R"({"messages": [{"role": "user", "content": 3}]})", Endpoint::chat),
            "messages[0].content");
  EXPECT_EQ(refused_field(R"({"messages": [{"role": "user", "content": "x", "tools": 1}]})",
                          Endpoint::chat),
            "messages[0].tools");
}

}  // namespace
}  // namespace qforge
