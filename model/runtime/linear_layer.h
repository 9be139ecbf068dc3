// One linear layer of the executor, y = x W^T with what follows it fused in, whatever
// precision holds W (f32 through oneDNN, int8/int4 through the JIT kernels).
//
//   x  M x K (leading dimension ldx)  ->  out  M x n() (leading dimension ldc)
//
//   plain:    out  = x W^T
//   swiglu:   out  = silu(x G^T) * (x U^T)    W holds the gate G and up U rows, n() = hidden
//   residual: out += x W^T                    out is the residual stream
//
// forward_normalized takes x before its RMSNorm (the norm fused into the layer's input).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "jit/base/huge_page_arena.h"
#include "jit/gemm/gemm_key.h"
#include "ops/linear/thread_pool.h"
#include "ops/norm/rmsnorm.h"

namespace qforge {

enum class LinearFusion { plain, swiglu, residual };

class LinearLayer {
 public:
  virtual ~LinearLayer() = default;

  // Not const: a layer keeps its scratch (quantized activations, gate/up values).
  virtual void forward(const float* x, std::int64_t m, std::int64_t ldx, float* out,
                       std::int64_t ldc, ThreadPool& pool) = 0;

  // out = fusion(rmsnorm(x) W^T), the executor's call for the inputs behind a norm (qkv,
  // gate/up, classifier). This default normalizes the rows into `normalized` (m x k()
  // floats) and calls forward() on them; an int8 layer overrides it to quantize each row
  // while it is normalized, leaving `normalized` untouched.
  virtual void forward_normalized(const float* x, std::int64_t m, std::int64_t ldx,
                                  const RmsNorm& norm, float* normalized, float* out,
                                  std::int64_t ldc, ThreadPool& pool) {
    for (std::int64_t r = 0; r < m; ++r) rmsnorm(normalized + r * k(), x + r * ldx, norm, k());
    forward(normalized, m, k(), out, ldc, pool);
  }

  virtual std::int64_t n() const = 0;  // output columns
  virtual std::int64_t k() const = 0;  // input columns
  virtual std::uint64_t weight_bytes() const = 0;
  virtual LinearFusion fusion() const = 0;
  // The bytes of packed weights move_packed_into places in an arena (0: none, as for the
  // oneDNN layers, whose memory is oneDNN's).
  virtual std::uint64_t packed_arena_bytes() const { return 0; }
  virtual void move_packed_into(const std::shared_ptr<HugePageArena>& arena) { (void)arena; }
  // The kernels this layer calls, for CodeCache::warmup (none for oneDNN layers).
  virtual std::vector<GemmKey> warmup_keys() const { return {}; }
  // The kernel a call of M rows runs (none for oneDNN layers).
  virtual std::optional<GemmKey> kernel_key(std::int64_t m) const {
    (void)m;
    return std::nullopt;
  }
};

}  // namespace qforge
