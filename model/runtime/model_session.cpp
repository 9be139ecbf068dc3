#include "model/runtime/model_session.h"

#include <algorithm>

#include "model/runtime/dense_linear.h"

namespace qforge {

std::unique_ptr<ModelSession> open_session(const std::string& path, const Precision& precision,
                                           int threads, int positions,
                                           const std::string& tokenizer_path,
                                           const LoadProgress& progress,
                                           const ModelPreparer& prepare) {
  threads = std::max(1, threads);
  auto session = std::make_unique<ModelSession>(
      load_model(path, precision, tokenizer_path, threads, progress, prepare));
  session->threads = threads;
  session->path = path;
  set_dense_threads(session->threads);
  session->pool =
      std::make_unique<ThreadPool>(session->model.weights.has_jit_layers() ? session->threads : 1);
  const int context = session->model.weights.config.seq_len;
  session->executor =
      std::make_unique<LlamaExecutor>(session->model.weights, *session->pool,
                                      positions > 0 ? std::min(positions, context) : context);
  return session;
}

}  // namespace qforge
