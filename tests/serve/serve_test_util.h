// The serve tests' model: stories260K (GGUF) loaded once per precision, and what a request
// gives when it runs alone through continue_generation (the reference every batched or
// served result must equal).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/runtime/generation.h"
#include "model/runtime/model_loader.h"
#include "ops/linear/thread_pool.h"
#include "serve/batch_engine.h"
#include "tests/support/model_paths.h"

namespace qforge::test {

struct ServeModel {
  LoadedModel model;
  ThreadPool pool;
  explicit ServeModel(const std::string& quant, int threads = 2)
      : model(load_model(model_path("stories260K/stories260K.gguf"), parse_precision(quant), "",
                         threads)),
        pool(threads) {}
};

struct Alone {
  std::string text;
  int completion_tokens = 0;
  bool stopped_by_token = false;
};

// The request run alone on a fresh single-sequence executor.
inline Alone run_alone(ServeModel& m, const serve::EngineRequest& r, int positions) {
  LlamaExecutor executor(m.model.weights, m.pool, positions);
  Sampler sampler(r.sampling);
  Alone out;
  const GenerationStats stats =
      continue_generation(executor, m.model.tokenizer, sampler, r.prompt, 0, r.max_tokens,
                          {[&](std::string_view piece) { out.text += piece; }, false, {}});
  out.completion_tokens = stats.generated_tokens;
  out.stopped_by_token = stats.stop_token >= 0;
  return out;
}

}  // namespace qforge::test
