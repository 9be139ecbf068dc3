#include "serve/openai_server.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "jit/base/error.h"
#include "serve/openai_response.h"
#include "serve/peer_connection.h"

namespace qforge::serve {
namespace {

using nlohmann::json;

std::int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_json(e), "application/json");
}

const char* status_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

}  // namespace

OpenAiServer::OpenAiServer(BatchEngine& engine, const Tokenizer& tokenizer, ChatFormat chat_format,
                           ServerOptions options)
    : engine_(engine),
      tokenizer_(tokenizer),
      chat_format_(chat_format),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  const int threads = std::max(2, options_.handler_threads);
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_write_timeout(options_.write_timeout_seconds, 0);
  http_->set_keep_alive_timeout(5);
  route();
}

OpenAiServer::~OpenAiServer() {
  stop();
}

int OpenAiServer::bind() {
  const int port = options_.port == 0
                       ? http_->bind_to_any_port(options_.host)
                       : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  QF_REQUIRE(port > 0, "serve: cannot listen on ", options_.host, ":", options_.port,
             " (address in use, or not an address of this machine)");
  return port;
}

void OpenAiServer::listen() {
  http_->listen_after_bind();
}

void OpenAiServer::stop() {
  if (http_) http_->stop();
}

void OpenAiServer::count_status(int status) {
  const std::lock_guard lock(counts_mutex_);
  ++status_counts_[status];
}

void OpenAiServer::route() {
  // Every /v1 path asks for the API key when one is set; /health and /metrics do not.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, ApiError(401, "authentication_error",
                             "a valid API key is required (Authorization: Bearer KEY)", "",
                             "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404 unknown path, 413 body too large, ...) get an error
  // object too; responses that have a body keep it.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty() && !res.is_chunked_content_provider_) {
      const std::string message =
          res.status == 404 ? "no route " + req.method + " " + req.path
          : res.status == 413
              ? "the request body exceeds " + std::to_string(options_.max_body_bytes) + " bytes"
              : "HTTP status " + std::to_string(res.status);
      send_error(res, ApiError(res.status, status_type(res.status), message));
    }
  });
  http_->set_logger(
      [this](const httplib::Request&, const httplib::Response& res) { count_status(res.status); });

  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const EngineMetrics m = engine_.metrics();
    res.set_content(json{{"status", "ok"},
                         {"slots", m.slots},
                         {"active_slots", m.active_slots},
                         {"queue_depth", m.queue_depth}}
                        .dump(),
                    "application/json");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const json model = {{"id", options_.model_id},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "qforge"},
                        {"context_length", engine_.context()}};
    res.set_content(json{{"object", "list"}, {"data", json::array({model})}}.dump(),
                    "application/json");
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });

  const auto generate = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res) {
      try {
        const OpenAiRequest r = parse_openai_request(req.body, endpoint);
        if (!r.model.empty() && r.model != options_.model_id)
          throw ApiError(404, "invalid_request_error",
                         "the model '" + r.model + "' does not exist; this server serves '" +
                             options_.model_id + "'",
                         "model", "model_not_found");
        std::vector<int> prompt;
        if (endpoint == Endpoint::chat) {
          prompt = tokenizer_.encode_prompt(render_chat(chat_format_, r.messages, true));
        } else {
          prompt = tokenizer_.encode_prompt(r.prompt);
        }
        if (prompt.empty()) prompt.push_back(tokenizer_.bos_id());
        const int context = engine_.context();
        const int length = static_cast<int>(prompt.size());
        const char* field = endpoint == Endpoint::chat ? "messages" : "prompt";
        if (length >= context)
          throw invalid_request(field,
                                "the prompt has " + std::to_string(length) +
                                    " tokens; this server's context holds " +
                                    std::to_string(context) + ", and at least one is generated",
                                "context_length_exceeded");
        int max_tokens = r.max_tokens_given           ? r.max_tokens
                         : endpoint == Endpoint::chat ? context - length
                                                      : std::min(r.max_tokens, context - length);
        if (length + max_tokens > context)
          throw invalid_request(
              "max_tokens",
              "the context holds " + std::to_string(context) + " tokens; the request asks for " +
                  std::to_string(length + max_tokens) + " (" + std::to_string(length) +
                  " in the prompt, " + std::to_string(max_tokens) + " to generate)",
              "context_length_exceeded");

        EngineRequest er;
        er.prompt = std::move(prompt);
        er.max_tokens = max_tokens;
        er.sampling.temperature = r.temperature;
        er.sampling.top_p = r.top_p;
        er.sampling.top_k = r.top_k;
        // A given seed as it is (0 as 1: xorshift64* needs a non-zero state), else the clock.
        er.sampling.seed = r.seed.value_or(static_cast<std::uint64_t>(
            std::chrono::steady_clock::now().time_since_epoch().count()));
        if (er.sampling.seed == 0) er.sampling.seed = 1;
        er.stop = r.stop;
        auto channel = std::make_shared<RequestChannel>();
        er.channel = channel;
        const BatchEngine::Admission admission = engine_.submit(std::move(er));
        if (admission == BatchEngine::Admission::queue_full)
          throw ApiError(503, "server_error", "every slot and the queue are taken; retry shortly",
                         "", "server_busy");
        if (admission == BatchEngine::Admission::stopped)
          throw ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");

        const ResponseIds ids{
            (endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++),
            unix_seconds(), options_.model_id};
        if (!r.stream) {
          // Nothing is written until the end, so the connection is watched instead: a
          // client that has gone frees its slot within a step or a poll.
          const PeerConnection peer(req.local_addr, req.local_port, req.remote_addr,
                                    req.remote_port);
          ChannelRead all;
          while (!all.result) {
            ChannelRead read = channel->wait_next(std::chrono::milliseconds(100));
            all.text += read.text;
            all.result = read.result;
            if (!all.result && peer.closed()) channel->cancel();
          }
          if (all.result->reason == FinishReason::error)
            throw ApiError(500, "server_error", all.result->error);
          if (all.result->reason == FinishReason::cancelled)
            throw ApiError(503, "server_error", "the request was cancelled (server shutting down)",
                           "", "cancelled");
          res.set_content(response_json(endpoint, ids, all.text, *all.result), "application/json");
          return;
        }
        res.set_header("Cache-Control", "no-cache");
        res.set_chunked_content_provider(
            "text/event-stream",
            [channel, ids, endpoint, first = true](std::size_t, httplib::DataSink& sink) mutable {
              const ChannelRead read = channel->wait_next(std::chrono::milliseconds(200));
              const auto send = [&](const std::string& event) {
                if (sink.write(event.data(), event.size())) return true;
                channel->cancel();  // the client has gone
                return false;
              };
              if (!read.text.empty() || (first && !read.result)) {
                if (!send(server_sent_event(chunk_json(endpoint, ids, read.text, nullptr, first))))
                  return false;
                first = false;
              }
              if (!read.result) return true;
              const GenerationResult& result = *read.result;
              std::string last;
              if (result.reason == FinishReason::error ||
                  result.reason == FinishReason::cancelled) {
                last = error_json(
                    ApiError(result.reason == FinishReason::error ? 500 : 503, "server_error",
                             result.reason == FinishReason::error
                                 ? result.error
                                 : "the request was cancelled (server shutting down)"));
              } else {
                last = chunk_json(endpoint, ids, "", &result, first);
              }
              if (!send(server_sent_event(last)) || !send(server_sent_event("[DONE]")))
                return false;
              sink.done();
              return true;
            },
            [channel](bool success) {
              if (!success) channel->cancel();
            });
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, "server_error", e.what()));
      }
    };
  };
  http_->Post("/v1/completions", generate(Endpoint::completions));
  http_->Post("/v1/chat/completions", generate(Endpoint::chat));
}

std::string OpenAiServer::metrics_text() const {
  const EngineMetrics m = engine_.metrics();
  std::ostringstream out;
  const auto metric = [&](const char* name, const char* type, const char* help) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  metric("qforge_requests_total", "counter", "Generation requests ended, by how they ended.");
  out << "qforge_requests_total{result=\"finished\"} " << m.requests_finished << '\n'
      << "qforge_requests_total{result=\"cancelled\"} " << m.requests_cancelled << '\n'
      << "qforge_requests_total{result=\"failed\"} " << m.requests_failed << '\n';
  metric("qforge_http_responses_total", "counter", "HTTP responses, by status.");
  {
    const std::lock_guard lock(counts_mutex_);
    for (const auto& [status, count] : status_counts_)
      out << "qforge_http_responses_total{status=\"" << status << "\"} " << count << '\n';
  }
  const auto single = [&](const char* name, const char* type, const char* help, double value) {
    metric(name, type, help);
    out << name << ' ' << value << '\n';
  };
  single("qforge_prompt_tokens_total", "counter", "Prompt tokens admitted to a slot.",
         double(m.prompt_tokens));
  single("qforge_generated_tokens_total", "counter", "Tokens sampled.", double(m.generated_tokens));
  single("qforge_decode_tokens_per_second", "gauge",
         "Tokens sampled per second of forward steps, since the start.",
         m.decode_tokens_per_second());
  single("qforge_queue_depth", "gauge", "Requests waiting for a slot.", m.queue_depth);
  single("qforge_active_slots", "gauge", "Slots running a request.", m.active_slots);
  single("qforge_slots", "gauge", "Slots (sequences batched together).", m.slots);
  metric("qforge_time_to_first_token_seconds", "histogram",
         "From a request's submission to its first sampled token.");
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b <= std::size(kFirstTokenBuckets); ++b) {
    cumulative += m.first_token_counts[b];
    out << "qforge_time_to_first_token_seconds_bucket{le=\"";
    if (b < std::size(kFirstTokenBuckets))
      out << kFirstTokenBuckets[b];
    else
      out << "+Inf";
    out << "\"} " << cumulative << '\n';
  }
  out << "qforge_time_to_first_token_seconds_sum " << m.first_token_seconds_sum << '\n'
      << "qforge_time_to_first_token_seconds_count " << m.first_token_count << '\n';
  return out.str();
}

}  // namespace qforge::serve
