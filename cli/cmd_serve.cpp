// qforge serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx T]
//              [--api-key KEY] [--queue Q] [--chat-template NAME] [model options]
// An OpenAI-compatible HTTP server (serve/openai_server.h) over N batched slots
// (serve/batch_engine.h), each with a context of T tokens. SIGINT / SIGTERM end it: the
// running requests are cancelled (their clients get an error), then it exits 0.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/chat_options.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "jit/base/error.h"
#include "model/runtime/model_session.h"
#include "serve/batch_engine.h"
#include "serve/openai_server.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  ChatFlags chat;
  std::string host = "127.0.0.1";
  int port = 8080;
  int parallel = 4;
  int ctx = 2048;
  int queue = 16;
  std::string api_key;
  std::string model_id;
  std::size_t max_body = std::size_t{1} << 20;
};

// SIGINT / SIGTERM write their number to a pipe (async-signal-safe); a thread reads it and
// stops the engine and the server. Writing -1 ends that thread when the server stops first.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int signal) {
  const int saved = errno;
  const char byte = static_cast<char>(signal);
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

void catch_stop_signals() {
  QF_REQUIRE(::pipe(g_signal_pipe) == 0, "serve: cannot create the signal pipe");
  struct sigaction action = {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

std::string file_stem(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::size_t dot = name.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
}

void serve(const Options& o) {
  const AppliedModelOptions applied = apply_model_options(o.model);
  // Loaded through the C API; the slots are one executor's sequences, so that every step
  // runs all of them through the weights once (a qf_sequence each would read them N times).
  const std::unique_ptr<qf_model> handle = open_model_handle(o.model, applied.threads);
  ModelSession* session = handle->session.get();
  const LoadedModel& model = session->model;
  const int positions = std::min(model.weights.config.seq_len, o.ctx);
  session->executor = std::make_unique<LlamaExecutor>(session->model.weights, *session->pool,
                                                      positions, o.parallel);
  serve::EngineOptions engine_options;
  engine_options.queue_limit = o.queue;
  serve::BatchEngine engine(*session->executor, model.tokenizer, engine_options);

  serve::ServerOptions server_options;
  server_options.host = o.host;
  server_options.port = o.port;
  server_options.api_key = o.api_key;
  server_options.model_id = o.model_id.empty() ? file_stem(o.model.model) : o.model_id;
  server_options.max_body_bytes = o.max_body;
  server_options.handler_threads = o.parallel + o.queue + 4;
  const ChatFormat format = chosen_chat_format(o.chat, model);
  serve::OpenAiServer server(engine, model.tokenizer, format, server_options);
  const int port = server.bind();
  std::fprintf(stderr,
               "qforge serve: %s as '%s' on http://%s:%d, %d slots of %d tokens, queue %d, chat "
               "format %s, policy: %s\n",
               o.model.model.c_str(), server_options.model_id.c_str(), o.host.c_str(), port,
               o.parallel, positions, o.queue, std::string(chat_format_name(format)).c_str(),
               policy_summary(model.weights).c_str());
  std::fflush(stderr);

  catch_stop_signals();
  std::thread waiter([&] {
    char signal = 0;
    while (::read(g_signal_pipe[0], &signal, 1) < 0 && errno == EINTR) {
    }
    if (signal == SIGINT || signal == SIGTERM) {
      std::fprintf(stderr, "qforge serve: %s, cancelling running requests\n",
                   signal == SIGINT ? "SIGINT" : "SIGTERM");
      engine.stop();
      server.stop();
    }
  });
  server.listen();
  engine.stop();
  const char done = -1;
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &done, 1);
  waiter.join();
  std::fprintf(stderr, "qforge serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  add_model_options(cmd, options->model);
  add_chat_options(cmd, options->chat);
  cmd->add_option("--host", options->host, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", options->port, "Port (default 8080; 0 picks a free one)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", options->parallel,
                  "Slots: requests generated together in one batch (default 4)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("-c,--ctx", options->ctx,
                  "Context per slot, capped at the model's (default 2048)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--queue", options->queue, "Requests waiting for a slot before 503 (default 16)")
      ->check(CLI::Range(0, 4096));
  cmd->add_option("--api-key", options->api_key, "Ask for Authorization: Bearer KEY");
  cmd->add_option("--model-id", options->model_id,
                  "The model's name in the API (default: the file's name without extension)");
  cmd->add_option("--max-body", options->max_body, "Largest request body in bytes (default 1 MiB)")
      ->check(CLI::PositiveNumber);
  cmd->callback([options] { serve(*options); });
}

}  // namespace qforge::cli
