// A plain layer whose output columns come from several layers over the same input: the
// fused q | k | v of a file whose tensors differ in type (llama-quantize's Q4_K_M keeps
// attn_v in Q6_K in some layers), each part kept in its own exact native form.
//
//   x  M x K  ->  out  M x (n_0 + n_1 + ...)      part i writes columns [c_i, c_i + n_i)
#pragma once

#include <memory>
#include <vector>

#include "model/runtime/linear_layer.h"

namespace qforge {

class RowStackedLinear final : public LinearLayer {
 public:
  // `parts`: plain layers of the same K, their rows stacked in this order.
  explicit RowStackedLinear(std::vector<std::unique_ptr<LinearLayer>> parts);

  void forward(const float* x, std::int64_t m, std::int64_t ldx, float* out, std::int64_t ldc,
               ThreadPool& pool) override;
  std::int64_t n() const override { return n_; }
  std::int64_t k() const override { return parts_.front()->k(); }
  std::uint64_t weight_bytes() const override;
  std::uint64_t packed_arena_bytes() const override;
  void move_packed_into(const std::shared_ptr<HugePageArena>& arena) override;
  LinearFusion fusion() const override { return LinearFusion::plain; }
  std::vector<GemmKey> warmup_keys() const override;
  // The first part's kernel (the others run the same M on their own kernels).
  std::optional<GemmKey> kernel_key(std::int64_t m) const override {
    return parts_.front()->kernel_key(m);
  }
  const std::vector<std::unique_ptr<LinearLayer>>& parts() const { return parts_; }

 private:
  std::vector<std::unique_ptr<LinearLayer>> parts_;
  std::int64_t n_ = 0;
};

}  // namespace qforge
