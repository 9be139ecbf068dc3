// An f32 or bf16 linear layer through oneDNN's matmul (bf16: weights and activations
// rounded to bf16, f32 accumulation and output). The weights are reordered once, at
// construction, into the layout oneDNN picks for decode; each shape of call (M and the
// leading dimensions) gets its primitive on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/runtime/linear_layer.h"

namespace qforge {

// oneDNN runs on its own OpenMP threads, not on the executor's pool: the two must not
// spin against each other, so an f32 model gets a pool of one thread (the caller) and
// oneDNN gets `threads`.
void set_dense_threads(int threads);

class DenseLinear final : public LinearLayer {
 public:
  // `weights` is row-major N x K (rows = output features). For swiglu it holds the gate
  // rows followed by the up rows (2 * hidden x K) and n() is hidden.
  DenseLinear(const float* weights, std::int64_t n, std::int64_t k, LinearFusion fusion,
              bool bf16 = false);
  ~DenseLinear() override;

  void forward(const float* x, std::int64_t m, std::int64_t ldx, float* out, std::int64_t ldc,
               ThreadPool& pool) override;
  std::int64_t n() const override;
  std::int64_t k() const override;
  std::uint64_t weight_bytes() const override;
  LinearFusion fusion() const override;
  // oneDNN's implementation name (e.g. "brg:avx2", "ref:any") for the decode primitive.
  std::string implementation() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace qforge
