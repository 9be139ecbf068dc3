// The operands of one kernel shape, set up once so every candidate blocking is timed on
// the same data, the way the call site runs it:
//
//   weights   W copies of the packed matrix, back to back:  [copy 0][copy 1]...[copy W-1]
//             W = 1 for M > 4 (a GEMM reuses its weights from cache within a call);
//             for M <= 4, or when asked for cold weights, enough copies to span 8 x the
//             reported L3 (at most kTunerColdWeightsMaxBytes), and every call reads the
//             next one, so memory is measured, not cache (a model's layers reach each
//             call with their weights cold)
//   per M     quantized activations, the output, bias / residual when the epilogue has them
//   a call    split over the pool as QuantizedLinear::forward splits it (call_split.h), by
//             units unless the caller asks for rows
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "jit/base/aligned_buffer.h"
#include "jit/gemm/gemm_args.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/gemm_key.h"
#include "ops/linear/thread_pool.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"

namespace qforge {

struct SampleStats {
  double median_us = 0;
  double spread = 0;  // (third quartile - first quartile) / median
};
SampleStats stats_of(std::vector<double> samples_us);

class KernelBench {
 public:
  // Packs random weights for `shape` (throws qforge::Error when its header cannot be
  // reproduced) and prepares operands for each of `ms`.
  enum class Weights { automatic, cold };
  KernelBench(const GemmKey& shape, std::span<const std::int64_t> ms, ThreadPool& pool,
              Weights weights = Weights::automatic);

  std::span<const std::int64_t> ms() const { return ms_; }
  std::int64_t weight_bytes() const { return weight_bytes_; }  // one copy
  int copies() const { return copies_; }

  // One call of `code`'s kernel for ms()[i] rows on the next weight copy, split as
  // QuantizedLinear splits it for that kernel.
  void call(const GemmGenerator& code, std::size_t i, ThreadSplit split = ThreadSplit::units);
  // Microseconds per call: `calls` back-to-back calls, timed together.
  double time_calls(const GemmGenerator& code, std::size_t i, int calls,
                    ThreadSplit split = ThreadSplit::units);

 private:
  struct Rows {
    QuantizedActivations x;
    FloatActivations xf;  // weight-only keys
    AlignedBuffer<std::uint8_t> out;
    std::vector<float> residual;
  };

  GemmKey shape_;
  ThreadPool& pool_;
  std::vector<std::int64_t> ms_;
  std::int64_t weight_bytes_ = 0;
  int copies_ = 1;
  int next_copy_ = 0;
  AlignedBuffer<std::uint8_t> weights_;
  std::vector<float> bias_;
  std::vector<Rows> rows_;
};

}  // namespace qforge
