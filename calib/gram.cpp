#include "calib/gram.h"

#include <algorithm>
#include <array>
#include <map>

#include <oneapi/dnnl/dnnl.hpp>

#include "jit/base/error.h"

namespace qforge {

using dnnl::memory;

// One primitive per (batch height, block rows, block columns): batches are all kBatchRows
// but the last, blocks all kBlock but the last.
struct GramAccumulator::Matmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<std::array<int, 3>, dnnl::matmul> by_shape;

  // out[a0.., b0..] = X[:, a0 .. a0+ka]^T X[:, b0 .. b0+kb], X rows x k (ld k), out ld k:
  // src = X^T's rows a0.. (ka x rows, strides (1, k)), weights = X's columns b0.. (rows x kb).
  void run(const float* x, int rows, int k, int a0, int ka, int b0, int kb, float* out) {
    const memory::desc src_md({ka, rows}, memory::data_type::f32, memory::dims{1, k});
    const memory::desc w_md({rows, kb}, memory::data_type::f32, memory::dims{k, 1});
    const memory::desc dst_md({ka, kb}, memory::data_type::f32, memory::dims{k, 1});
    auto [it, inserted] = by_shape.try_emplace({rows, ka, kb});
    if (inserted)
      it->second = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, w_md, dst_md), engine));
    it->second.execute(stream,
                       {{DNNL_ARG_SRC, memory(src_md, engine, const_cast<float*>(x) + a0)},
                        {DNNL_ARG_WEIGHTS, memory(w_md, engine, const_cast<float*>(x) + b0)},
                        {DNNL_ARG_DST, memory(dst_md, engine, out + std::size_t(a0) * k + b0)}});
    stream.wait();
  }
};

GramAccumulator::GramAccumulator(int k)
    : k_(k),
      sum_(static_cast<std::size_t>(k) * k, 0.0),
      batch_(static_cast<std::size_t>(kBatchRows) * k),
      product_(static_cast<std::size_t>(k) * k),
      matmul_(std::make_unique<Matmul>()) {
  QF_REQUIRE(k > 0, "GramAccumulator: k = ", k);
}

GramAccumulator::~GramAccumulator() = default;
GramAccumulator::GramAccumulator(GramAccumulator&&) noexcept = default;
GramAccumulator& GramAccumulator::operator=(GramAccumulator&&) noexcept = default;

void GramAccumulator::add(const float* x, int rows) {
  while (rows > 0) {
    const int take = std::min(rows, kBatchRows - batch_rows_);
    std::copy_n(x, static_cast<std::size_t>(take) * k_,
                batch_.data() + static_cast<std::size_t>(batch_rows_) * k_);
    batch_rows_ += take;
    x += static_cast<std::size_t>(take) * k_;
    rows -= take;
    if (batch_rows_ == kBatchRows) flush();
  }
}

void GramAccumulator::flush() {
  if (batch_rows_ == 0) return;
  const auto k = static_cast<std::size_t>(k_);
  for (int a0 = 0; a0 < k_; a0 += kBlock) {
    const int ka = std::min(kBlock, k_ - a0);
    for (int b0 = a0; b0 < k_; b0 += kBlock)
      matmul_->run(batch_.data(), batch_rows_, k_, a0, ka, b0, std::min(kBlock, k_ - b0),
                   product_.data());
    // Rows a0 .. a0 + ka of the product hold its blocks from the diagonal block on.
    for (std::size_t a = std::size_t(a0); a < std::size_t(a0 + ka); ++a)
      for (std::size_t b = std::size_t(a0); b < k; ++b) sum_[a * k + b] += product_[a * k + b];
  }
  batch_rows_ = 0;
}

std::span<const double> GramAccumulator::sum() {
  flush();
  // Below the diagonal, from the transposed upper triangle (the lower halves of the
  // diagonal blocks were summed too, but in another order: exact symmetry for Cholesky).
  const auto k = static_cast<std::size_t>(k_);
  for (std::size_t a = 0; a < k; ++a)
    for (std::size_t b = 0; b < a; ++b) sum_[a * k + b] = sum_[b * k + a];
  return sum_;
}

}  // namespace qforge
