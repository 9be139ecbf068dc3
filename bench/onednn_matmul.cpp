#include "bench/onednn_matmul.h"

#include <omp.h>

#include <random>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace qforge::bench {

using dnnl::memory;

struct OnednnInt8Matmul::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  memory::desc src_md, weights_md, dst_md;
  dnnl::matmul primitive;
  std::vector<memory> weights;
  std::int64_t weight_bytes = 0;
};

OnednnInt8Matmul::OnednnInt8Matmul(std::int64_t m, std::int64_t n, std::int64_t k, int copies)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.src_md = memory::desc({m, k}, memory::data_type::u8, memory::format_tag::ab);
  s.dst_md = memory::desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc any_weights({k, n}, memory::data_type::s8, memory::format_tag::any);
  dnnl::primitive_attr attr;
  std::vector<float> scales(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> scale_dist(1e-4f, 1e-3f);
  for (auto& v : scales) v = scale_dist(rng);
  attr.set_output_scales(1 << 1, scales);
  const dnnl::matmul::desc desc(s.src_md, any_weights, s.dst_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, s.engine);
  s.primitive = dnnl::matmul(pd);
  s.weights_md = pd.weights_desc();
  s.weight_bytes = static_cast<std::int64_t>(s.weights_md.get_size());
  // N x K row-major int8 weights = a K x N matrix in format "ba"; reorder to oneDNN's.
  const memory::desc user_md({k, n}, memory::data_type::s8, memory::format_tag::ba);
  std::vector<std::int8_t> values(static_cast<std::size_t>(n * k));
  std::uniform_int_distribution<int> q(-127, 127);
  for (int c = 0; c < copies; ++c) {
    for (auto& v : values) v = static_cast<std::int8_t>(q(rng));
    memory user(user_md, s.engine, values.data());
    memory packed(s.weights_md, s.engine);
    dnnl::reorder(user, packed).execute(s.stream, user, packed);
    s.weights.push_back(packed);
  }
  s.stream.wait();
}

OnednnInt8Matmul::~OnednnInt8Matmul() = default;

void OnednnInt8Matmul::run(int copy, const std::uint8_t* src, float* dst) {
  State& s = *state_;
  memory src_memory(s.src_md, s.engine, const_cast<std::uint8_t*>(src));
  memory dst_memory(s.dst_md, s.engine, dst);
  s.primitive.execute(s.stream, {{DNNL_ARG_SRC, src_memory},
                                 {DNNL_ARG_WEIGHTS, s.weights[copy]},
                                 {DNNL_ARG_DST, dst_memory}});
  s.stream.wait();
}

std::int64_t OnednnInt8Matmul::weight_bytes() const {
  return state_->weight_bytes;
}

void set_onednn_threads(int threads) {
  omp_set_num_threads(threads);
}

}  // namespace qforge::bench
