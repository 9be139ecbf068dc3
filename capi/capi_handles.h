// What the C API's opaque handles hold, and the C++ twin of qf_model_load for callers
// that also change the file before its weights are built (the CLI's calibrated methods).
//
//   qf_model     ModelSession (weights, tokenizer, thread pool) + the lock every forward
//                of its sequences takes (they share the pool)
//   qf_sequence  LlamaExecutor over the model's weights (its own KV cache) + the tokens
//                it holds: cached (in the KV cache) and one pending (generated, not fed)
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capi/tuning_setup.h"
#include "include/qforge.h"
#include "model/runtime/model_session.h"

struct qf_model {
  std::unique_ptr<qforge::ModelSession> session;
  qforge::TuningStatus tuning;  // what the load installed (when params.tuning asked)
  std::string description;
  std::mutex forward_lock;
};

struct qf_sequence {
  qf_model* model = nullptr;
  std::unique_ptr<qforge::LlamaExecutor> executor;
  std::vector<int> cached;   // tokens at cache positions [0, size)
  std::vector<int> pending;  // generated after them and not yet fed (0 or 1 token)
};

namespace qforge::capi {

// qf_model_load with `prepare` run on the opened file; throws qforge::Error.
std::unique_ptr<qf_model> load_model(const std::string& path, const qf_model_params& params,
                                     const ModelPreparer& prepare = {});

}  // namespace qforge::capi
