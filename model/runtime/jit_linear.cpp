#include "model/runtime/jit_linear.h"

#include <cmath>
#include <utility>

#include "jit/base/error.h"

namespace qforge {
namespace {

Epilogue epilogue_of(LinearFusion fusion) {
  Epilogue epilogue;
  epilogue.swiglu = fusion == LinearFusion::swiglu;
  epilogue.residual = fusion == LinearFusion::residual;
  return epilogue;
}

}  // namespace

EpilogueArgs JitLinear::epilogue_args(float* out, std::int64_t ldc) const {
  EpilogueArgs args;
  if (fusion_ == LinearFusion::residual) {
    args.residual = out;
    args.ld_residual = ldc;
  }
  return args;
}

JitLinear::JitLinear(PackedWeights weights, LinearFusion fusion, ActivationKind activation)
    : linear_(std::move(weights), epilogue_of(fusion), best_isa(), activation), fusion_(fusion) {}

void JitLinear::forward(const float* x, std::int64_t m, std::int64_t ldx, float* out,
                        std::int64_t ldc, ThreadPool& pool) {
  const EpilogueArgs args = epilogue_args(out, ldc);
  if (linear_.weight_only()) {
    // One f32 copy of the activations per thread, shared by the weight-only layers the
    // thread runs one after another (a prefill chunk's rows x K floats; its buffers only
    // grow), not one per layer.
    static thread_local FloatActivations float_scratch;
    linear_.forward_weight_only(x, m, ldx, float_scratch, args, out, ldc, pool);
  } else {
    linear_.forward(x, m, ldx, scratch_, args, out, ldc, pool, static_scale_);
  }
}

void JitLinear::set_static_activation_scale(float scale) {
  QF_REQUIRE(scale == 0.f || (std::isfinite(scale) && scale > 0.f), "static activation scale ",
             scale, ": expected a positive finite number (or 0: dynamic)");
  QF_REQUIRE(scale == 0.f || !linear_.weight_only(),
             "static activation scale: a weight-only layer keeps its activations in f32");
  static_scale_ = scale;
}

void JitLinear::forward_normalized(const float* x, std::int64_t m, std::int64_t ldx,
                                   const RmsNorm& norm, float* normalized, float* out,
                                   std::int64_t ldc, ThreadPool& pool) {
  if (linear_.weight_only()) {
    LinearLayer::forward_normalized(x, m, ldx, norm, normalized, out, ldc, pool);
    return;
  }
  linear_.forward_normalized(x, m, ldx, norm, scratch_, epilogue_args(out, ldc), out, ldc, pool,
                             static_scale_);
}

}  // namespace qforge
