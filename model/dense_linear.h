// An f32 linear layer through oneDNN's f32 matmul. The weights are reordered once, at
// construction, into the layout oneDNN picks for decode; each shape of call (M and the
// leading dimensions) gets its primitive on first use.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/linear_layer.h"

namespace qforge {

// oneDNN runs on its own OpenMP threads, not on the executor's pool: the two must not
// spin against each other, so an f32 model gets a pool of one thread (the caller) and
// oneDNN gets `threads`.
void set_dense_threads(int threads);

class DenseLinear final : public LinearLayer {
 public:
  // `weights` is row-major N x K (rows = output features). For swiglu it holds the gate
  // rows followed by the up rows (2 * hidden x K) and n() is hidden.
  DenseLinear(const float* weights, std::int64_t n, std::int64_t k, LinearFusion fusion);
  ~DenseLinear() override;

  void forward(const float* x, std::int64_t m, std::int64_t ldx, float* out, std::int64_t ldc,
               ThreadPool& pool) override;
  std::int64_t n() const override;
  std::int64_t k() const override;
  std::uint64_t weight_bytes() const override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace qforge
