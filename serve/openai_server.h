// The OpenAI-compatible HTTP front of a BatchEngine (cpp-httplib, one handler thread per
// connection, none of them running the model):
//
//   POST /v1/completions, /v1/chat/completions   parse (openai_request.h) -> tokens ->
//        BatchEngine::submit -> wait on the request's channel -> JSON, or server-sent
//        events while it generates (a failed write cancels the request: its slot is
//        freed at the engine's next step)
//   GET  /v1/models, /health, /metrics (Prometheus text)
//
// Errors are OpenAI error objects: 400 bad request, 401 wrong or missing API key (when
// one is set), 404 unknown model or path, 413 body over the limit, 503 with Retry-After
// when every slot and the queue are taken or the server is shutting down.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "model/runtime/chat_format.h"
#include "model/tokenizer/tokenizer.h"
#include "serve/batch_engine.h"

namespace httplib {
class Server;
}

namespace qforge::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() says which)
  std::string model_id = "qforge";
  std::string api_key;  // "" = none asked
  std::size_t max_body_bytes = std::size_t{1} << 20;
  int handler_threads = 16;
  int write_timeout_seconds = 30;  // a client that reads nothing is dropped after this
};

class OpenAiServer {
 public:
  // `engine` and `tokenizer` must outlive the server.
  OpenAiServer(BatchEngine& engine, const Tokenizer& tokenizer, ChatFormat chat_format,
               ServerOptions options);
  ~OpenAiServer();

  // Binds the listening socket and returns the port; throws qforge::Error naming the
  // address when it cannot.
  int bind();
  // Serves until stop(); returns once every connection has ended.
  void listen();
  void stop();

  std::string metrics_text() const;  // GET /metrics

 private:
  void route();
  void count_status(int status);

  BatchEngine& engine_;
  const Tokenizer& tokenizer_;
  ChatFormat chat_format_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<std::uint64_t> next_id_{1};
  mutable std::mutex counts_mutex_;
  std::map<int, std::uint64_t> status_counts_;  // HTTP responses by status
};

}  // namespace qforge::serve
