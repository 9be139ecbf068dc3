// The HTTP front on a loopback port: answers equal running each request alone, streamed
// or not; every refusal is an OpenAI error object with its status; a busy server answers
// 503 with Retry-After; a client that goes away (streamed or not) frees its slot; one
// that reads nothing stalls nobody.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "model/runtime/chat_format.h"
#include "serve/openai_server.h"
#include "tests/serve/serve_test_util.h"

namespace qforge {
namespace {

using nlohmann::json;
constexpr int kContext = 512;  // stories260K's own

// A model served on a free loopback port for the length of a test.
class LiveServer {
 public:
  LiveServer(test::ServeModel& m, int slots, int queue, const std::string& api_key = "",
             std::size_t max_body = 1 << 20)
      : executor_(m.model.weights, m.pool, kContext, slots),
        engine_(executor_, m.model.tokenizer, serve::EngineOptions{.queue_limit = queue}) {
    serve::ServerOptions options;
    options.port = 0;
    options.model_id = "stories";
    options.api_key = api_key;
    options.max_body_bytes = max_body;
    options.handler_threads = slots + queue + 4;
    server_ = std::make_unique<serve::OpenAiServer>(engine_, m.model.tokenizer, ChatFormat::Llama2,
                                                    options);
    port_ = server_->bind();
    thread_ = std::thread([this] { server_->listen(); });
  }
  ~LiveServer() {
    engine_.stop();
    server_->stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  serve::EngineMetrics metrics() const { return engine_.metrics(); }

 private:
  LlamaExecutor executor_;
  serve::BatchEngine engine_;
  std::unique_ptr<serve::OpenAiServer> server_;
  int port_ = 0;
  std::thread thread_;
};

// Runs on the model's pool: only while no server is generating on it.
std::string alone_text(test::ServeModel& m, const std::vector<int>& prompt, int max_tokens) {
  serve::EngineRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return test::run_alone(m, r, kContext).text;
}

// A raw TCP connection to the server, or -1.
int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The data lines of a server-sent event stream, in order.
std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", at);
    out.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return out;
}

json error_of(const httplib::Result& res, int status) {
  EXPECT_TRUE(res);
  if (!res) return {};
  EXPECT_EQ(res->status, status) << res->body;
  const json j = json::parse(res->body, nullptr, false);
  EXPECT_TRUE(j.contains("error")) << res->body;
  if (!j.contains("error")) return {};
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(j["error"]["type"].is_string());
  return j["error"];
}

TEST(OpenAiServer, CompletionsAndChatAnswerAsEachRunsAlone) {
  test::ServeModel m("int8");
  LiveServer server(m, 4, 4);
  httplib::Client c = server.client();
  const auto res = c.Post("/v1/completions",
                          R"({"model": "stories", "prompt": "Once upon a time", "max_tokens": 30,
                              "temperature": 0})",
                          "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json j = json::parse(res->body);
  const std::vector<int> prompt = m.model.tokenizer.encode_prompt("Once upon a time");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "stories");
  EXPECT_EQ(j["choices"][0]["text"], alone_text(m, prompt, 30));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], 30);
  EXPECT_EQ(j["usage"]["total_tokens"], prompt.size() + 30);

  const auto chat = c.Post("/v1/chat/completions",
                           R"({"messages": [{"role": "user", "content": "Tell a story"}],
                               "max_tokens": 20, "temperature": 0})",
                           "application/json");
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  const json k = json::parse(chat->body);
  const std::vector<int> chat_prompt = m.model.tokenizer.encode_prompt(
      render_chat(ChatFormat::Llama2, {{"user", "Tell a story"}}, true));
  EXPECT_EQ(k["object"], "chat.completion");
  EXPECT_EQ(k["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(k["choices"][0]["message"]["content"], alone_text(m, chat_prompt, 20));
  EXPECT_EQ(k["usage"]["prompt_tokens"], chat_prompt.size());

  const auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "stories");
  const auto health = c.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(json::parse(health->body)["status"], "ok");
  const auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("qforge_generated_tokens_total 50"), std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("qforge_time_to_first_token_seconds_count 2"), std::string::npos);
  EXPECT_NE(metrics->body.find("qforge_http_responses_total{status=\"200\"}"), std::string::npos);
}

TEST(OpenAiServer, StreamsTheSameTextAsServerSentEvents) {
  test::ServeModel m("int8");
  LiveServer server(m, 2, 2);
  httplib::Client c = server.client();
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = std::string(path).find("chat") != std::string::npos;
    const std::string body =
        chat ? R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 25,
                   "temperature": 0, "stream": true})"
             : R"({"prompt": "Lily", "max_tokens": 25, "temperature": 0, "stream": true})";
    const auto res = c.Post(path, body, "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
    const std::vector<std::string> data = events(res->body);
    ASSERT_GE(data.size(), 3u) << res->body;
    EXPECT_EQ(data.back(), "[DONE]");
    std::string text;
    for (std::size_t i = 0; i + 1 < data.size(); ++i) {
      const json chunk = json::parse(data[i]);
      const json& choice = chunk["choices"][0];
      text += chat ? choice["delta"].value("content", "") : choice["text"].get<std::string>();
      if (chat && i == 0) {
        EXPECT_EQ(choice["delta"]["role"], "assistant");
      }
      const bool last = i + 2 == data.size();
      EXPECT_EQ(choice["finish_reason"].is_null(), !last);
      EXPECT_EQ(chunk.contains("usage"), last);
      if (last) {
        EXPECT_EQ(chunk["usage"]["completion_tokens"], 25);
      }
    }
    const std::vector<int> prompt = chat ? m.model.tokenizer.encode_prompt(render_chat(
                                               ChatFormat::Llama2, {{"user", "Hi"}}, true))
                                         : m.model.tokenizer.encode_prompt("Lily");
    EXPECT_EQ(text, alone_text(m, prompt, 25));
  }
}

TEST(OpenAiServer, EveryRefusalIsAnErrorObjectWithItsStatus) {
  test::ServeModel m("int8");
  LiveServer server(m, 1, 1, "", /*max_body=*/4096);
  httplib::Client c = server.client();
  EXPECT_EQ(error_of(c.Post("/v1/completions", "{oops", "application/json"), 400)["type"],
            "invalid_request_error");
  EXPECT_EQ(
      error_of(c.Post("/v1/completions", R"({"prompt": "a", "top_k": "x"})", "application/json"),
               400)["param"],
      "top_k");
  EXPECT_EQ(error_of(c.Post("/v1/completions", R"({"prompt": "a", "model": "gpt-4"})",
                            "application/json"),
                     404)["code"],
            "model_not_found");
  error_of(c.Get("/v1/nothing-here"), 404);
  error_of(c.Post("/v1/completions", R"({"prompt": ")" + std::string(5000, 'a') + "\"}",
                  "application/json"),
           413);
  std::string long_prompt;
  for (int i = 0; i < 150; ++i) long_prompt += "Once upon a time ";
  EXPECT_EQ(
      error_of(c.Post("/v1/completions", json{{"prompt", long_prompt}}.dump(), "application/json"),
               400)["code"],
      "context_length_exceeded");
  const json beyond = error_of(
      c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 600})", "application/json"),
      400);
  EXPECT_EQ(beyond["param"], "max_tokens");
  EXPECT_EQ(beyond["code"], "context_length_exceeded");
  // The server still serves after all of them, and holds no slot.
  const auto ok =
      c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 3})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(server.metrics().active_slots, 0);
}

TEST(OpenAiServer, AnApiKeyIsAskedOfEveryApiPath) {
  test::ServeModel m("int8");
  LiveServer server(m, 1, 1, "sesame");
  httplib::Client c = server.client();
  EXPECT_EQ(
      error_of(c.Post("/v1/completions", R"({"prompt": "a"})", "application/json"), 401)["type"],
      "authentication_error");
  error_of(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}}), 401);
  const auto ok = c.Get("/v1/models", {{"Authorization", "Bearer sesame"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  const auto health = c.Get("/health");  // no key: for load balancers
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// A streamed request that the client abandons after its first event; returns once it has.
void abandon_after_first_event(int port, const std::string& body) {
  httplib::Client c("127.0.0.1", port);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [](const char*, std::size_t, std::uint64_t, std::uint64_t) {
    return false;  // go away
  };
  c.send(req);
}

bool wait_until(const std::function<bool()>& done) {
  for (int i = 0; i < 600 && !done(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return done();
}

// Greedy from this prompt runs past 400 tokens without an end token (tens of ms here,
// far longer than a loopback request takes), so a stream of it holds its slot while the
// test looks.
const std::string kLongStream =
    R"({"prompt": "Once upon a time", "max_tokens": 400, "temperature": 0, "stream": true})";

TEST(OpenAiServer, BusyAnswers503WithRetryAfterAndAnAbandonedStreamFreesItsSlot) {
  test::ServeModel m("int8");
  LiveServer server(m, 1, 0);
  std::thread holder([&] {
    httplib::Client c("127.0.0.1", server.port());
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = kLongStream;
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&](const char*, std::size_t, std::uint64_t, std::uint64_t) {
      // The slot is taken and the queue holds none: the next request is turned away.
      httplib::Client other("127.0.0.1", server.port());
      const auto busy =
          other.Post("/v1/completions", R"({"prompt": "a", "max_tokens": 2})", "application/json");
      EXPECT_TRUE(busy);
      if (busy) {
        EXPECT_EQ(busy->status, 503) << busy->body;
        EXPECT_EQ(busy->get_header_value("Retry-After"), "1");
        EXPECT_EQ(json::parse(busy->body)["error"]["code"], "server_busy");
      }
      return false;  // then go away
    };
    c.send(req);
  });
  holder.join();
  EXPECT_TRUE(wait_until([&] { return server.metrics().active_slots == 0; }));
  EXPECT_EQ(server.metrics().requests_cancelled, 1u);
  abandon_after_first_event(server.port(), kLongStream);
  EXPECT_TRUE(wait_until([&] { return server.metrics().requests_cancelled == 2; }));
  EXPECT_EQ(server.metrics().requests_finished, 0u);
  httplib::Client c = server.client();
  const auto ok =
      c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST(OpenAiServer, AClientThatReadsNothingStallsNobody) {
  test::ServeModel m("int8");
  // Before the server runs: the executor's pool serves one caller at a time.
  const std::string alone = alone_text(m, m.model.tokenizer.encode_prompt("Lily"), 12);
  LiveServer server(m, 2, 2);
  // A raw connection sends a streamed request and never reads its answer.
  const int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  const std::string body = R"({"prompt": "Once", "max_tokens": 100, "stream": true})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  // Others are served meanwhile, as each would be alone.
  httplib::Client c = server.client();
  for (int i = 0; i < 3; ++i) {
    const auto res =
        c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 12, "temperature": 0})",
               "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(json::parse(res->body)["choices"][0]["text"], alone);
  }
  ::close(fd);
  EXPECT_TRUE(wait_until([&] { return server.metrics().active_slots == 0; }));
}

TEST(OpenAiServer, AClientGoneBeforeItsNonStreamedAnswerFreesItsSlot) {
  test::ServeModel m("int8");
  LiveServer server(m, 1, 0);
  // A raw connection sends a long non-streamed request and closes at once: nothing is
  // written to it before the end, so only watching the connection can notice.
  const int fd = connect_loopback(server.port());
  ASSERT_GE(fd, 0);
  const std::string body = R"({"prompt": "Once", "max_tokens": 500})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  ::close(fd);
  EXPECT_TRUE(wait_until([&] {
    const serve::EngineMetrics now = server.metrics();
    return now.requests_cancelled + now.requests_finished == 1 && now.active_slots == 0;
  }));
  const serve::EngineMetrics after = server.metrics();
  EXPECT_EQ(after.requests_cancelled, 1u);
  EXPECT_EQ(after.requests_finished, 0u);
  EXPECT_LT(after.generated_tokens, 500u);
  // The freed slot serves the next client.
  httplib::Client c = server.client();
  const auto ok =
      c.Post("/v1/completions", R"({"prompt": "Lily", "max_tokens": 4})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

}  // namespace
}  // namespace qforge
