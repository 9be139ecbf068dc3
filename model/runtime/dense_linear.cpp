#include "model/runtime/dense_linear.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include <immintrin.h>
#include <omp.h>
#include <sys/mman.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "jit/base/half_float.h"
#include "jit/base/parallel_for.h"
#include "jit/cpu/cpu_info.h"

namespace qforge {

using dnnl::memory;

void set_dense_threads(int threads) {
  omp_set_num_threads(threads);
}

struct DenseLinear::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  LinearFusion fusion = LinearFusion::plain;
  memory::data_type type = memory::data_type::f32;  // weights and activations
  std::string implementation;
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
      const memory::desc src_md({m, k}, type, memory::dims{type_ld(ldx), 1});
      const memory::desc dst_md({m, matmul_n}, memory::data_type::f32, memory::dims{ld_dst, 1});
      const dnnl::matmul::desc desc(src_md, weights.get_desc(), dst_md);
      it->second = dnnl::matmul(dnnl::matmul::primitive_desc(desc, engine));
    }
    return it->second;
  }
  // bf16 activations are converted into a dense M x K buffer (leading dimension K).
  std::int64_t type_ld(std::int64_t ldx) const { return type == memory::data_type::bf16 ? k : ldx; }
  std::vector<float> scratch;  // M x matmul_n: gate/up values, or x W^T before the residual add
  std::vector<std::uint16_t> bf16_x;
};

namespace {

// Does this oneDNN build run bf16 matmul on this CPU? (oneDNN needs AVX512 core or
// AVX2-VNNI-2 for it; elsewhere it refuses the primitive.)
bool onednn_has_bf16_matmul() {
  static const bool has = [] {
    try {
      const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      const memory::desc src({1, 64}, memory::data_type::bf16, memory::format_tag::ab);
      const memory::desc wei({64, 64}, memory::data_type::bf16, memory::format_tag::any);
      const memory::desc dst({1, 64}, memory::data_type::f32, memory::format_tag::ab);
      dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return has;
}

// out[8 x 8 at (c, r)] = in[8 x 8 at (r, c)]^T: eight rows in, eight rows out.
__attribute__((target("avx2"))) void transpose_8x8_avx2(float* out, std::int64_t ld_out,
                                                        const float* in, std::int64_t ld_in) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * ld_in);
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // quads of rows: 2 x 2 blocks of pairs
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit halves of the two quads
    _mm256_storeu_ps(out + i * ld_out, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * ld_out, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

// out (K x N, row-major) = the transpose of in (N x K, row-major), in 64 x 64 tiles (one
// tile's reads and writes stay in L1) of 8 x 8 register transposes, tile columns shared
// by the load threads.
void transpose_into(float* out, const float* in, std::int64_t n, std::int64_t k) {
  constexpr std::int64_t kTile = 64;
  const bool avx2 = cpu_info().isa.avx2;
  parallel_for(
      (k + kTile - 1) / kTile, default_load_threads(), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row0 = 0; row0 < n; row0 += kTile)
          for (std::int64_t col0 = begin * kTile; col0 < std::min(k, end * kTile); col0 += kTile) {
            const std::int64_t rows = std::min(n, row0 + kTile), cols = std::min(k, col0 + kTile);
            std::int64_t col = col0;
            if (avx2)
              for (; col + 8 <= cols; col += 8) {
                std::int64_t row = row0;
                for (; row + 8 <= rows; row += 8)
                  transpose_8x8_avx2(out + col * n + row, n, in + row * k + col, k);
                for (; row < rows; ++row)
                  for (std::int64_t c = col; c < col + 8; ++c) out[c * n + row] = in[row * k + c];
              }
            for (; col < cols; ++col)
              for (std::int64_t row = row0; row < rows; ++row)
                out[col * n + row] = in[row * k + col];
          }
      });
}

// Weights rounded to bf16 and held as f32: the bf16 model's values where oneDNN cannot
// run bf16 itself.
std::vector<float> rounded_to_bf16(const float* weights, std::int64_t count) {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "qforge: oneDNN has no bf16 matmul on this CPU; bf16 layers use weights rounded "
                 "to bf16, computed and stored in f32\n");
  });
  std::vector<float> out(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i)
    out[std::size_t(i)] = bf16_to_f32(f32_to_bf16(weights[i]));
  return out;
}

// oneDNN does not survive every failed allocation of its own: under an address-space
// limit (ulimit -v), primitive creation was seen to crash. So a dense layer is made only
// where the room it needs is there: its weights in oneDNN's layout, 64 MiB for oneDNN's
// code and scratch, and a stack for each OpenMP thread. Otherwise std::bad_alloc, which
// the loader reports with the size the weights need.
void require_address_space(std::int64_t weight_bytes) {
  const std::size_t stack_bytes = std::max(std::size_t{8} << 20, thread_stack_bytes());
  const std::size_t bytes = static_cast<std::size_t>(weight_bytes) + (std::size_t{64} << 20) +
                            static_cast<std::size_t>(omp_get_max_threads()) * stack_bytes;
  void* trial =
      ::mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (trial == MAP_FAILED) throw std::bad_alloc();
  ::munmap(trial, bytes);
}

}  // namespace

DenseLinear::DenseLinear(const float* weights, std::int64_t n, std::int64_t k, LinearFusion fusion,
                         bool bf16)
    : state_(std::make_unique<State>()) {
  require_address_space((fusion == LinearFusion::swiglu ? 2 * n : n) * k * (bf16 ? 2 : 4));
  std::vector<float> rounded;
  if (bf16 && !onednn_has_bf16_matmul()) {
    rounded = rounded_to_bf16(weights, (fusion == LinearFusion::swiglu ? 2 * n : n) * k);
    weights = rounded.data();
    bf16 = false;
  }
  State& s = *state_;
  s.fusion = fusion;
  s.type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::data_type type = s.type;
  s.n = n;
  s.k = k;
  s.matmul_n = fusion == LinearFusion::swiglu ? 2 * n : n;
  // oneDNN's choice of weight layout for decode (M = 1) serves every M.
  const memory::desc src_md({1, k}, type, memory::format_tag::ab);
  const memory::desc dst_md({1, s.matmul_n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc any_weights({k, s.matmul_n}, type, memory::format_tag::any);
  const dnnl::matmul::desc desc(src_md, any_weights, dst_md);
  const dnnl::matmul::primitive_desc pd(desc, s.engine);
  // Row-major N x K = a K x N matrix in format "ba"; oneDNN wants its own layout. Its
  // plain K x N ("ab") is a transpose; anything else goes through a reorder.
  s.weights = memory(pd.weights_desc(), s.engine);
  const memory::desc plain_md({k, s.matmul_n}, memory::data_type::f32, memory::format_tag::ab);
  if (!bf16 && pd.weights_desc() == plain_md) {
    transpose_into(static_cast<float*>(s.weights.get_data_handle()), weights, s.matmul_n, k);
  } else {
    const memory::desc user_md({k, s.matmul_n}, memory::data_type::f32, memory::format_tag::ba);
    memory user(user_md, s.engine, const_cast<float*>(weights));
    dnnl::reorder(user, s.weights).execute(s.stream, user, s.weights);
    s.stream.wait();
  }
  const memory::desc any_m_src({DNNL_RUNTIME_DIM_VAL, k}, type, memory::format_tag::ab);
  const memory::desc any_m_dst({DNNL_RUNTIME_DIM_VAL, s.matmul_n}, memory::data_type::f32,
                               memory::format_tag::ab);
  const dnnl::matmul::primitive_desc any_m_pd(
      dnnl::matmul::desc(any_m_src, s.weights.get_desc(), any_m_dst), s.engine);
  s.implementation = any_m_pd.impl_info_str();
  if (s.implementation.rfind("ref", 0) != 0) s.any_m = dnnl::matmul(any_m_pd);
  // oneDNN generates its GEMM code on first use: one decode row and one prefill block
  // now, at load.
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{16}}) {
    std::vector<float> zeros(static_cast<std::size_t>(m * (k + s.matmul_n)), 0.f);
    memory src(memory::desc({m, k}, type, memory::format_tag::ab), s.engine, zeros.data());
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
  const memory::desc src_md({m, s.k}, s.type, memory::dims{s.type_ld(ldx), 1});
  const memory::desc dst_md({m, s.matmul_n}, memory::data_type::f32, memory::dims{ld_dst, 1});
  void* src_data = const_cast<float*>(x);
  if (s.type == memory::data_type::bf16) {
    s.bf16_x.resize(static_cast<std::size_t>(m * s.k));
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t i = 0; i < s.k; ++i)
        s.bf16_x[std::size_t(r * s.k + i)] = f32_to_bf16(x[r * ldx + i]);
    src_data = s.bf16_x.data();
  }
  memory src(src_md, s.engine, src_data);
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
LinearFusion DenseLinear::fusion() const {
  return state_->fusion;
}
std::string DenseLinear::implementation() const {
  return state_->implementation;
}
std::uint64_t DenseLinear::weight_bytes() const {
  return state_->weights.get_desc().get_size();
}

}  // namespace qforge
