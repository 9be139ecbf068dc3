#include "calib/gram.h"

#include <algorithm>
#include <map>

#include <oneapi/dnnl/dnnl.hpp>

#include "jit/base/error.h"

namespace qforge {

using dnnl::memory;

// One primitive per chunk height (calibration chunks are all kChunkRows but the last).
struct GramAccumulator::Matmul {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<int, dnnl::matmul> by_rows;

  // src = X^T (k x rows: X read with strides (1, k)), weights = X (rows x k), dst k x k.
  void run(const float* x, int rows, int k, float* out) {
    const memory::desc src_md({k, rows}, memory::data_type::f32, memory::dims{1, k});
    const memory::desc w_md({rows, k}, memory::data_type::f32, memory::dims{k, 1});
    const memory::desc dst_md({k, k}, memory::data_type::f32, memory::dims{k, 1});
    auto [it, inserted] = by_rows.try_emplace(rows);
    if (inserted)
      it->second = dnnl::matmul(
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, w_md, dst_md), engine));
    auto* data = const_cast<float*>(x);
    it->second.execute(stream, {{DNNL_ARG_SRC, memory(src_md, engine, data)},
                                {DNNL_ARG_WEIGHTS, memory(w_md, engine, data)},
                                {DNNL_ARG_DST, memory(dst_md, engine, out)}});
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
  matmul_->run(batch_.data(), batch_rows_, k_, product_.data());
  for (std::size_t i = 0; i < sum_.size(); ++i) sum_[i] += product_[i];
  batch_rows_ = 0;
}

std::span<const double> GramAccumulator::sum() {
  flush();
  return sum_;
}

}  // namespace qforge
