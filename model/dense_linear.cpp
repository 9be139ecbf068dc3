#include "model/dense_linear.h"

#include <cmath>
#include <map>
#include <string>
#include <tuple>

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace qforge {

using dnnl::memory;

void set_dense_threads(int threads) {
  omp_set_num_threads(threads);
}

struct DenseLinear::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  LinearFusion fusion = LinearFusion::plain;
  std::int64_t n = 0;  // output columns of the layer
  std::int64_t k = 0;
  std::int64_t matmul_n = 0;  // columns oneDNN computes (2 n for a gate/up pair)
  memory weights;
  // Dense rows (ldx = K, ld_dst = columns): one primitive with M given at run time, made
  // at load, when oneDNN serves it with its jit GEMM (not its reference code).
  dnnl::matmul any_m;
  // Other leading dimensions: one primitive per (M, ldx, ld_dst), made on first use.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, dnnl::matmul> primitives;

  dnnl::matmul& primitive(std::int64_t m, std::int64_t ldx, std::int64_t ld_dst) {
    if (any_m && ldx == k && ld_dst == matmul_n) return any_m;
    auto [it, inserted] = primitives.try_emplace({m, ldx, ld_dst});
    if (inserted) {
      const memory::desc src_md({m, k}, memory::data_type::f32, memory::dims{ldx, 1});
      const memory::desc dst_md({m, matmul_n}, memory::data_type::f32, memory::dims{ld_dst, 1});
      const dnnl::matmul::desc desc(src_md, weights.get_desc(), dst_md);
      it->second = dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine));
    }
    return it->second;
  }
  std::vector<float> scratch;  // M x matmul_n: gate/up values, or x W^T before the residual add
};

DenseLinear::DenseLinear(const float* weights, std::int64_t n, std::int64_t k, LinearFusion fusion)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.fusion = fusion;
  s.n = n;
  s.k = k;
  s.matmul_n = fusion == LinearFusion::swiglu ? 2 * n : n;
  // oneDNN's choice of weight layout for decode (M = 1) serves every M.
  const memory::desc src_md({1, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc dst_md({1, s.matmul_n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc any_weights({k, s.matmul_n}, memory::data_type::f32, memory::format_tag::any);
  const dnnl::matmul::desc desc(src_md, any_weights, dst_md);
  const dnnl::matmul::primitive_desc pd(desc, s.engine);
  // Row-major N x K = a K x N matrix in format "ba"; oneDNN wants its own layout. Its
  // plain K x N ("ab") is a transpose; anything else goes through a reorder.
  s.weights = memory(pd.weights_desc(), s.engine);
  const memory::desc plain_md({k, s.matmul_n}, memory::data_type::f32, memory::format_tag::ab);
  if (pd.weights_desc() == plain_md) {
    auto* packed = static_cast<float*>(s.weights.get_data_handle());
    for (std::int64_t row = 0; row < s.matmul_n; ++row)
      for (std::int64_t col = 0; col < k; ++col)
        packed[col * s.matmul_n + row] = weights[row * k + col];
  } else {
    const memory::desc user_md({k, s.matmul_n}, memory::data_type::f32, memory::format_tag::ba);
    memory user(user_md, s.engine, const_cast<float*>(weights));
    dnnl::reorder(user, s.weights).execute(s.stream, user, s.weights);
    s.stream.wait();
  }
  const memory::desc any_m_src({DNNL_RUNTIME_DIM_VAL, k}, memory::data_type::f32,
                               memory::format_tag::ab);
  const memory::desc any_m_dst({DNNL_RUNTIME_DIM_VAL, s.matmul_n}, memory::data_type::f32,
                               memory::format_tag::ab);
  const dnnl::matmul::primitive_desc any_m_pd(
      dnnl::matmul::desc(any_m_src, s.weights.get_desc(), any_m_dst), s.engine);
  if (std::string(any_m_pd.impl_info_str()).rfind("ref", 0) != 0) s.any_m = dnnl::matmul(any_m_pd);
  // oneDNN generates its GEMM code on first use: one decode row and one prefill block
  // now, at load.
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{16}}) {
    std::vector<float> zeros(static_cast<std::size_t>(m * (k + s.matmul_n)), 0.f);
    memory src(memory::desc({m, k}, memory::data_type::f32, memory::format_tag::ab), s.engine,
               zeros.data());
    memory dst(memory::desc({m, s.matmul_n}, memory::data_type::f32, memory::format_tag::ab),
               s.engine, zeros.data() + m * k);
    s.primitive(m, k, s.matmul_n)
        .execute(s.stream,
                 {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst}});
  }
  s.stream.wait();
}

DenseLinear::~DenseLinear() = default;

void DenseLinear::forward(const float* x, std::int64_t m, std::int64_t ldx, float* out,
                          std::int64_t ldc, ThreadPool&) {
  State& s = *state_;
  // plain layers write out directly; the others go through scratch (a oneDNN sum post-op
  // would do the residual add, but its GEMM path is far slower for decode).
  const bool direct = s.fusion == LinearFusion::plain;
  if (!direct) s.scratch.resize(static_cast<std::size_t>(m * s.matmul_n));
  float* dst = direct ? out : s.scratch.data();
  const std::int64_t ld_dst = direct ? ldc : s.matmul_n;
  dnnl::matmul& primitive = s.primitive(m, ldx, ld_dst);
  const memory::desc src_md({m, s.k}, memory::data_type::f32, memory::dims{ldx, 1});
  const memory::desc dst_md({m, s.matmul_n}, memory::data_type::f32, memory::dims{ld_dst, 1});
  memory src(src_md, s.engine, const_cast<float*>(x));
  memory dst_memory(dst_md, s.engine, dst);
  primitive.execute(
      s.stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst_memory}});
  s.stream.wait();
  if (s.fusion == LinearFusion::residual) {
    for (std::int64_t r = 0; r < m; ++r) {
      const float* y = s.scratch.data() + r * s.matmul_n;
      float* stream = out + r * ldc;
      for (std::int64_t i = 0; i < s.n; ++i) stream[i] += y[i];
    }
  } else if (s.fusion == LinearFusion::swiglu) {
    // row r of scratch: [ gate 0..n-1 | up 0..n-1 ]  ->  out[r][i] = silu(gate[i]) * up[i]
    for (std::int64_t r = 0; r < m; ++r) {
      const float* gate = s.scratch.data() + r * s.matmul_n;
      const float* up = gate + s.n;
      float* y = out + r * ldc;
      for (std::int64_t i = 0; i < s.n; ++i) {
        float value = gate[i];
        value *= 1.f / (1.f + std::exp(-value));  // the order run.c rounds in
        y[i] = value * up[i];
      }
    }
  }
}

std::int64_t DenseLinear::n() const {
  return state_->n;
}
std::int64_t DenseLinear::k() const {
  return state_->k;
}
std::uint64_t DenseLinear::weight_bytes() const {
  return state_->weights.get_desc().get_size();
}

}  // namespace qforge
