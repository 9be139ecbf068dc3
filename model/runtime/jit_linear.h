// An int8/int4 linear layer on the JIT kernels: QuantizedLinear with its fusion as the
// kernel epilogue (SwiGLU of interleaved gate/up panels, or + residual), plus the scratch
// that holds the quantized activations between calls (per-row scales, or one static
// scale from calibration), or, for a weight-only layer, the f32 rows the FMA kernels read.
#pragma once

#include <cstdint>
#include <vector>

#include "model/runtime/linear_layer.h"
#include "ops/linear/quantized_linear.h"

namespace qforge {

class JitLinear final : public LinearLayer {
 public:
  // `weights` is packed with pack_swiglu_pair for swiglu, pack_weights otherwise.
  JitLinear(PackedWeights weights, LinearFusion fusion,
            ActivationKind activation = ActivationKind::s8);

  // residual: the kernel loads out[m][n], adds, and stores the same element, so the
  // residual stream is read and written in place.
  void forward(const float* x, std::int64_t m, std::int64_t ldx, float* out, std::int64_t ldc,
               ThreadPool& pool) override;
  // int8 activations: each row normalized in cache and quantized from there (static or
  // dynamic scale); weight-only layers take the default path.
  void forward_normalized(const float* x, std::int64_t m, std::int64_t ldx, const RmsNorm& norm,
                          float* normalized, float* out, std::int64_t ldc,
                          ThreadPool& pool) override;
  std::int64_t n() const override { return linear_.weights().n(); }
  std::int64_t k() const override { return linear_.weights().k(); }
  std::uint64_t weight_bytes() const override { return linear_.weights().geometry.total_bytes; }
  std::uint64_t packed_arena_bytes() const override {
    return HugePageArena::piece_bytes(linear_.weights().data.held_bytes());
  }
  void move_packed_into(const std::shared_ptr<HugePageArena>& arena) override {
    linear_.move_weights_into(arena);
  }
  std::vector<GemmKey> warmup_keys() const override { return linear_.warmup_keys(); }
  LinearFusion fusion() const override { return fusion_; }
  std::optional<GemmKey> kernel_key(std::int64_t m) const override { return linear_.key_for(m); }
  const QuantizedLinear& quantized() const { return linear_; }

  // Static W8A8: every input row quantized with this one scale (from calibration, > 0),
  // no per-row max pass; 0 (the default) is dynamic, each row its own scale. A
  // weight-only layer refuses a scale (its activations are not quantized).
  void set_static_activation_scale(float scale);
  float static_activation_scale() const { return static_scale_; }

 private:
  EpilogueArgs epilogue_args(float* out, std::int64_t ldc) const;  // residual: out in place

  QuantizedLinear linear_;
  LinearFusion fusion_;
  float static_scale_ = 0.f;
  QuantizedActivations scratch_;
};

}  // namespace qforge
