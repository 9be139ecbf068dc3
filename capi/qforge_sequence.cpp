// The C API's sequences: a KV cache of their own over the model's weights, and generation
// that continues from whatever they hold.
//
//   sequence:  cached [t0 .. tc)  (in the KV cache)   pending [g]  (generated, not fed)
//   qf_generate(prompt):  run pending + tokens(prompt) at position c, sample, call back
//   afterwards:           cached += what was fed;  pending = the last token if unfed
#include <string>
#include <vector>

#include "capi/capi_handles.h"
#include "capi/last_error.h"
#include "jit/base/error.h"
#include "model/runtime/generation.h"
#include "model/tokenizer/utf8_stream.h"

using qforge::capi::guarded;

namespace {

void check_params(const qf_generate_params& p) {
  QF_REQUIRE(p.max_tokens >= 0, "qf_generate_params.max_tokens: ", p.max_tokens, " is negative");
  QF_REQUIRE(p.temperature >= 0.f, "qf_generate_params.temperature: ", p.temperature,
             " is negative");
  QF_REQUIRE(p.top_k >= 0, "qf_generate_params.top_k: ", p.top_k, " is negative");
  QF_REQUIRE(p.top_p > 0.f && p.top_p <= 1.f, "qf_generate_params.top_p: ", p.top_p,
             " is outside (0, 1]");
}

// The prompt's own text, as generation would print it after the tokens before it.
std::string echo_text(const qforge::Tokenizer& tokenizer, const std::vector<int>& tokens,
                      std::size_t first, int previous) {
  qforge::Utf8Stream stream;
  std::string out;
  for (std::size_t i = first; i < tokens.size(); ++i) {
    out += stream.push(tokenizer.decode(previous, tokens[i]));
    previous = tokens[i];
  }
  return out + stream.finish();
}

}  // namespace

extern "C" {

qf_sequence* qf_sequence_new(qf_model* model, int context) {
  return guarded<qf_sequence*>(nullptr, [&] {
    QF_REQUIRE(model != nullptr, "qf_sequence_new: model is NULL");
    QF_REQUIRE(context >= 0, "qf_sequence_new: context ", context, " is negative");
    qforge::ModelSession& session = *model->session;
    const int own = session.model.weights.config.seq_len;
    auto sequence = std::make_unique<qf_sequence>();
    sequence->model = model;
    const std::lock_guard lock(model->forward_lock);
    sequence->executor = std::make_unique<qforge::LlamaExecutor>(
        session.model.weights, *session.pool, context == 0 || context > own ? own : context);
    return sequence.release();
  });
}

void qf_sequence_free(qf_sequence* sequence) {
  delete sequence;
}

int qf_sequence_length(const qf_sequence* sequence) {
  return sequence != nullptr ? static_cast<int>(sequence->cached.size() + sequence->pending.size())
                             : -1;
}

int qf_sequence_context(const qf_sequence* sequence) {
  return sequence != nullptr ? sequence->executor->positions() : -1;
}

void qf_sequence_reset(qf_sequence* sequence) {
  if (sequence == nullptr) return;
  sequence->cached.clear();
  sequence->pending.clear();
}

qf_generate_params qf_generate_default_params(void) {
  qf_generate_params p{};
  p.max_tokens = 256;
  p.temperature = 1.f;
  p.top_k = 0;
  p.top_p = 0.9f;
  p.seed = 1;
  p.echo_prompt = 0;
  return p;
}

int qf_generate(qf_sequence* sequence, const char* prompt, const qf_generate_params* params,
                qf_token_callback callback, void* user, qf_generate_stats* stats) {
  return guarded(-1, [&] {
    QF_REQUIRE(sequence != nullptr, "qf_generate: sequence is NULL");
    QF_REQUIRE(prompt != nullptr, "qf_generate: prompt is NULL");
    const qf_generate_params p = params != nullptr ? *params : qf_generate_default_params();
    check_params(p);
    const qforge::Tokenizer& tokenizer = sequence->model->session->model.tokenizer;
    qforge::LlamaExecutor& executor = *sequence->executor;
    std::vector<int>& cached = sequence->cached;

    // What runs: the pending token, then the prompt's tokens (BOS first on an empty
    // sequence). Nothing at all: the last cached token runs again, for its logits.
    const bool empty = cached.empty() && sequence->pending.empty();
    std::vector<int> tokens = sequence->pending;
    const std::size_t prompt_first = tokens.size();
    const std::vector<int> added =
        tokenizer.encode(prompt, empty && tokenizer.adds_bos(), false, /*parse_special=*/true);
    tokens.insert(tokens.end(), added.begin(), added.end());
    int start = static_cast<int>(cached.size());
    if (tokens.empty() && empty) tokens.push_back(tokenizer.bos_id());
    if (tokens.empty()) tokens.push_back(cached[--start]);
    QF_REQUIRE(start + tokens.size() <= static_cast<std::size_t>(executor.positions()),
               "qf_generate: the prompt (", added.size(), " tokens) does not fit: the sequence ",
               "holds ", cached.size() + sequence->pending.size(), " of its ", executor.positions(),
               " positions");

    if (p.echo_prompt != 0 && callback != nullptr) {
      const std::string echo = echo_text(tokenizer, tokens, prompt_first,
                                         prompt_first > 0 ? tokens[prompt_first - 1]
                                         : start > 0      ? cached[start - 1]
                                                          : -1);
      if (!echo.empty()) callback(echo.data(), echo.size(), -1, user);
    }

    std::string text;  // the text of the token being reported
    qforge::GenerationOutput out;
    out.on_text = [&](std::string_view piece) { text.append(piece); };
    out.on_token = [&](int token) {
      const bool stop = callback != nullptr && callback(text.data(), text.size(), token, user) != 0;
      text.clear();
      return !stop;
    };
    qforge::GenerationStats run;
    {
      const std::lock_guard lock(sequence->model->forward_lock);
      if (p.max_tokens == 0) {  // prefill only
        executor.forward(tokens, start);
        run.prompt_tokens = static_cast<int>(tokens.size());
        run.next_position = start + static_cast<int>(tokens.size());
      } else {
        qforge::Sampler sampler({p.temperature, p.top_k, p.top_p, p.seed});
        run = qforge::continue_generation(executor, tokenizer, sampler, tokens, start, p.max_tokens,
                                          out);
      }
    }
    if (!text.empty() && callback != nullptr) callback(text.data(), text.size(), -1, user);

    // The cache now holds positions [0, next_position): the tokens run, then the
    // generated ones fed back; a last generated token not fed stays pending.
    std::vector<int> all = std::move(tokens);
    all.insert(all.end(), run.generated.begin(), run.generated.end());
    const std::size_t fed = static_cast<std::size_t>(run.next_position - start);
    cached.resize(static_cast<std::size_t>(start));
    cached.insert(cached.end(), all.begin(), all.begin() + static_cast<std::ptrdiff_t>(fed));
    sequence->pending.assign(all.begin() + static_cast<std::ptrdiff_t>(fed), all.end());

    if (stats != nullptr) {
      stats->prompt_tokens = static_cast<int>(added.size()) + (empty && added.empty() ? 1 : 0);
      stats->generated_tokens = run.generated_tokens;
      stats->decode_tokens = run.decode_steps;
      stats->prefill_seconds = run.prefill_seconds;
      stats->decode_seconds = run.decode_seconds;
      stats->stop_reason = run.stopped_by_caller ? QF_STOP_CALLBACK
                           : run.stop_token >= 0 ? QF_STOP_END_OF_TEXT
                                                 : QF_STOP_LENGTH;
    }
    return 0;
  });
}

}  // extern "C"
