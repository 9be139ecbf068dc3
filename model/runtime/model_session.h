// A loaded model ready to run: weights, the thread pool its kernels split over, and an
// executor with a KV cache of `positions` positions. The executor keeps references into
// the session, so a session lives behind a pointer and never moves.
//
//   some layer on the JIT kernels: pool of `threads` (dense layers: oneDNN on its own threads)
//   every layer dense (f32 / bf16): pool of 1 (the caller), oneDNN on `threads` OpenMP threads
#pragma once

#include <memory>
#include <string>

#include "model/runtime/llama_executor.h"
#include "model/runtime/model_loader.h"
#include "ops/linear/thread_pool.h"

namespace qforge {

struct ModelSession {
  explicit ModelSession(LoadedModel loaded) : model(std::move(loaded)) {}
  LoadedModel model;
  std::string path;  // the model file
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<LlamaExecutor> executor;
  int threads = 1;
};

// positions 0: the model's context length.
std::unique_ptr<ModelSession> open_session(const std::string& path, const Precision& precision,
                                           int threads, int positions = 0,
                                           const std::string& tokenizer_path = "",
                                           const LoadProgress& progress = {},
                                           const ModelPreparer& prepare = {});

}  // namespace qforge
