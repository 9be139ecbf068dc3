// The C API's models: loading with the CLI's model options as strings, the model's
// dimensions, tokenize / detokenize, chat prompts, and the error channel.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capi/capi_handles.h"
#include "capi/last_error.h"
#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "model/runtime/chat_format.h"
#include "model/runtime/kv_cache.h"
#include "model/runtime/tensor_policy.h"

namespace qforge::capi {
namespace {

thread_local std::string g_last_error;

std::string text_of(const char* s) {
  return s != nullptr ? std::string(s) : std::string();
}

// The strings of a (pointer, count) field; names the field when the pointer is missing.
std::vector<std::string> strings_of(const char* const* items, int count, const char* field) {
  QF_REQUIRE(count >= 0, "qf_model_params.", field, ": count ", count, " is negative");
  QF_REQUIRE(count == 0 || items != nullptr, "qf_model_params.", field, ": NULL with ", count,
             " items");
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    QF_REQUIRE(items[i] != nullptr, "qf_model_params.", field, "[", i, "] is NULL");
    out.emplace_back(items[i]);
  }
  return out;
}

Precision precision_of(const qf_model_params& p) {
  Precision precision = parse_precision(text_of(p.quant), text_of(p.lm_head));
  if (!text_of(p.kv).empty()) precision.kv = parse_kv_type(p.kv, "qf_model_params.kv");
  if (!text_of(p.preset).empty()) precision.rules = preset_rules(p.preset);
  for (const std::string& keep : strings_of(p.keep, p.n_keep, "keep"))
    precision.rules.push_back(parse_keep_rule(keep));
  for (const std::string& type : strings_of(p.tensor_types, p.n_tensor_types, "tensor_types"))
    precision.rules.push_back(parse_tensor_type_rule(type));
  return precision;
}

// Installs params.tuning: "" leaves the process's tuning as it is.
TuningStatus apply_tuning_field(const std::string& tuning, int threads) {
  if (tuning.empty()) return {};
  if (tuning == "auto") return install_tuning_file("", false, threads);
  if (tuning == "none") return install_tuning_file("", true, threads);
  return install_tuning_file(tuning, false, threads);
}

std::string describe(const ModelSession& session, const Precision& precision) {
  const LlamaConfig& c = session.model.weights.config;
  char line[256];
  std::snprintf(line, sizeof line,
                "dim %d, %d layers, %d heads / %d kv, vocab %d, context %d; %s; %s kernels, "
                "%d threads",
                c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len,
                to_string(precision).c_str(), std::string(isa_name(best_isa())).c_str(),
                session.threads);
  return line;
}

// Copies `text` as the C API returns text: its length, at most capacity - 1 bytes + NUL.
int write_text(const std::string& text, char* out, std::size_t capacity) {
  QF_REQUIRE(text.size() <= static_cast<std::size_t>(INT_MAX), "text of ", text.size(),
             " bytes is longer than an int can count");
  QF_REQUIRE(capacity == 0 || out != nullptr, "output buffer is NULL with capacity ", capacity);
  if (capacity > 0) {
    const std::size_t n = std::min(text.size(), capacity - 1);
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int>(text.size());
}

}  // namespace

void set_last_error(std::string message) {
  g_last_error = std::move(message);
}

void clear_last_error() {
  g_last_error.clear();
}

std::unique_ptr<qf_model> load_model(const std::string& path, const qf_model_params& params,
                                     const ModelPreparer& prepare) {
  QF_REQUIRE(params.threads >= 0, "qf_model_params.threads: ", params.threads, " is negative");
  if (!text_of(params.max_isa).empty())
    set_max_isa(parse_isa(params.max_isa, "qf_model_params.max_isa"));
  const int threads = params.threads > 0 ? params.threads : std::max(1, cpu_info().cores);
  const Precision precision = precision_of(params);
  auto model = std::make_unique<qf_model>();
  model->tuning = apply_tuning_field(text_of(params.tuning), threads);
  LoadProgress progress;
  if (params.progress != nullptr)
    progress = [&params](int done, int total) {
      params.progress(done, total, params.progress_user);
    };
  // Sequences bring their own executors: the session's is made as small as it can be.
  model->session = open_session(path, precision, threads, /*positions=*/1,
                                text_of(params.tokenizer), progress, prepare);
  model->session->executor.reset();
  model->description = describe(*model->session, precision);
  return model;
}

}  // namespace qforge::capi

using qforge::capi::guarded;

extern "C" {

const char* qf_last_error(void) {
  return qforge::capi::g_last_error.c_str();
}

const char* qf_version(void) {
  return QFORGE_VERSION;
}

qf_model_params qf_model_default_params(void) {
  return qf_model_params{};
}

qf_model* qf_model_load(const char* path, const qf_model_params* params) {
  return guarded<qf_model*>(nullptr, [&] {
    QF_REQUIRE(path != nullptr, "qf_model_load: path is NULL");
    const qf_model_params p = params != nullptr ? *params : qf_model_default_params();
    return qforge::capi::load_model(path, p).release();
  });
}

void qf_model_free(qf_model* model) {
  delete model;
}

int qf_model_vocab_size(const qf_model* model) {
  return model != nullptr ? model->session->model.weights.config.vocab_size : -1;
}

int qf_model_context_length(const qf_model* model) {
  return model != nullptr ? model->session->model.weights.config.seq_len : -1;
}

int qf_model_bos(const qf_model* model) {
  return model != nullptr ? model->session->model.tokenizer.bos_id() : -1;
}

int qf_model_eos(const qf_model* model) {
  return model != nullptr ? model->session->model.tokenizer.eos_id() : -1;
}

const char* qf_model_description(const qf_model* model) {
  return model != nullptr ? model->description.c_str() : "";
}

int qf_tokenize(const qf_model* model, const char* text, size_t length, int add_bos,
                int32_t* tokens, int capacity) {
  return guarded(-1, [&] {
    QF_REQUIRE(model != nullptr, "qf_tokenize: model is NULL");
    QF_REQUIRE(text != nullptr || length == 0, "qf_tokenize: text is NULL");
    QF_REQUIRE(capacity >= 0 && (capacity == 0 || tokens != nullptr), "qf_tokenize: no room for ",
               capacity, " tokens");
    const qforge::Tokenizer& tokenizer = model->session->model.tokenizer;
    const std::vector<int> ids =
        tokenizer.encode(std::string_view(text != nullptr ? text : "", length),
                         add_bos != 0 && tokenizer.adds_bos(), false, /*parse_special=*/true);
    QF_REQUIRE(ids.size() <= static_cast<std::size_t>(INT_MAX), "qf_tokenize: too many tokens");
    std::copy_n(ids.begin(), std::min<std::size_t>(ids.size(), capacity), tokens);
    return static_cast<int>(ids.size());
  });
}

int qf_detokenize(const qf_model* model, const int32_t* tokens, int n, char* text,
                  size_t capacity) {
  return guarded(-1, [&] {
    QF_REQUIRE(model != nullptr, "qf_detokenize: model is NULL");
    QF_REQUIRE(n >= 0 && (n == 0 || tokens != nullptr), "qf_detokenize: no ", n, " tokens given");
    const qforge::Tokenizer& tokenizer = model->session->model.tokenizer;
    std::string out;
    for (int i = 0; i < n; ++i) {
      QF_REQUIRE(tokens[i] >= 0 && tokens[i] < tokenizer.vocab_size(), "qf_detokenize: token ", i,
                 " = ", tokens[i], " is outside the vocabulary [0, ", tokenizer.vocab_size(), ")");
      out.append(tokenizer.decode(i > 0 ? tokens[i - 1] : -1, tokens[i]));
    }
    return qforge::capi::write_text(out, text, capacity);
  });
}

int qf_chat_prompt(const qf_model* model, const char* format, const char* const* roles,
                   const char* const* contents, int n, char* text, size_t capacity) {
  return guarded(-1, [&] {
    QF_REQUIRE(model != nullptr, "qf_chat_prompt: model is NULL");
    QF_REQUIRE(n >= 0 && (n == 0 || (roles != nullptr && contents != nullptr)),
               "qf_chat_prompt: no ", n, " messages given");
    const qforge::LoadedModel& loaded = model->session->model;
    qforge::ChatFormat chat = qforge::chat_format_for(loaded.chat_template, loaded.tokenizer);
    if (format != nullptr && *format != '\0') {
      const auto named = qforge::chat_format_named(format);
      QF_REQUIRE(named.has_value(), "qf_chat_prompt: format '", format,
                 "' is not llama2, llama3 or chatml");
      chat = *named;
    }
    std::vector<qforge::ChatMessage> messages;
    for (int i = 0; i < n; ++i) {
      QF_REQUIRE(roles[i] != nullptr && contents[i] != nullptr, "qf_chat_prompt: message ", i,
                 " has a NULL role or content");
      messages.push_back({roles[i], contents[i]});
    }
    return qforge::capi::write_text(qforge::render_chat(chat, messages, true), text, capacity);
  });
}

}  // extern "C"
