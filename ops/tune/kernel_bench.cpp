#include "ops/tune/kernel_bench.h"

#include "jit/tune/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "ops/linear/call_split.h"
#include "ops/quant/pack.h"
#include "ops/quant/split_activations.h"

namespace qforge {
namespace {

// Values do not change a kernel's speed; a cheap generator keeps big shapes quick to set up.
std::vector<float> pseudo_random(std::int64_t count, std::uint32_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = scale * (static_cast<float>(s >> 8) / float(1 << 24) * 2.f - 1.f);
  }
  return v;
}

bool same_layout(const PackedHeader& h, const GemmKey& shape) {
  return h.n == shape.n && h.k == shape.k && h.k_padded == shape.k_padded &&
         h.group == shape.group && h.bits == shape.bits &&
         (h.asymmetric != 0) == shape.asymmetric && h.superblock_groups == shape.superblock_groups;
}

// The scheme whose packed header matches the key: per-channel, else per-group g.
QuantScheme scheme_for(const GemmKey& shape) {
  QuantScheme scheme;
  scheme.bits = shape.bits;
  scheme.asymmetric = shape.asymmetric;
  if (same_layout(make_packed_header(shape.n, shape.k, scheme, shape.epilogue.swiglu), shape))
    return scheme;
  scheme.granularity = Granularity::per_group;
  scheme.group = static_cast<int>(shape.group);
  scheme.superblock = static_cast<int>(shape.group) * shape.superblock_groups;
  QF_REQUIRE(
      same_layout(make_packed_header(shape.n, shape.k, scheme, shape.epilogue.swiglu), shape),
      "tune: no quantization scheme reproduces the layout of ", kernel_name(shape));
  return scheme;
}

PackedWeights pack_for(const GemmKey& shape, int threads) {
  const QuantScheme scheme = scheme_for(shape);
  const auto w = pseudo_random(shape.n * shape.k, 1, 0.05f);
  if (!shape.epilogue.swiglu) return pack_weights(w.data(), shape.n, shape.k, scheme, threads);
  const auto up = pseudo_random(shape.n * shape.k, 2, 0.05f);
  return pack_swiglu_pair(w.data(), up.data(), shape.n, shape.k, scheme, threads);
}

int rotation_copies(std::span<const std::int64_t> ms, std::int64_t bytes, bool cold) {
  const std::int64_t smallest = *std::min_element(ms.begin(), ms.end());
  if (smallest > 4 && !cold) return 1;
  return cold_weight_copies(bytes, kTunerColdWeightsMaxBytes);
}

}  // namespace

SampleStats stats_of(std::vector<double> samples) {
  if (samples.empty()) return {};
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  SampleStats s;
  s.median_us = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  const double q1 = samples[n / 4], q3 = samples[(3 * n) / 4 < n ? (3 * n) / 4 : n - 1];
  s.spread = s.median_us > 0 ? (q3 - q1) / s.median_us : 0;
  return s;
}

KernelBench::KernelBench(const GemmKey& shape, std::span<const std::int64_t> ms, ThreadPool& pool,
                         Weights weights)
    : shape_(shape), pool_(pool), ms_(ms.begin(), ms.end()) {
  QF_REQUIRE(!ms_.empty(), "tune: no M values");
  const PackedWeights packed = pack_for(shape, pool.size());
  weight_bytes_ = packed.geometry.total_bytes;
  copies_ = rotation_copies(ms_, weight_bytes_, weights == Weights::cold);
  weights_.resize(static_cast<std::size_t>(weight_bytes_) * copies_);
  for (int c = 0; c < copies_; ++c)
    std::memcpy(weights_.data() + c * weight_bytes_, packed.data.data(), weight_bytes_);
  bias_ = pseudo_random(shape.n, 3, 0.1f);
  const std::int64_t columns = shape.units() * 16;
  for (const std::int64_t m : ms_) {
    Rows rows;
    const auto x = pseudo_random(m * shape.k, 4, 1.f);
    if (shape.weight_only()) {
      prepare_float_activations(rows.xf, m, shape.k, shape.k_padded, shape.group, shape.bits,
                                shape.activation == ActivationKind::bf16);
      copy_float_activation_rows(x.data(), shape.k, 0, m, rows.xf);
    } else if (const int digits = shape.split_digits()) {  // each row's digit rows
      prepare_split_activations(rows.x, digits, m, shape.k, shape.k_padded, shape.group);
      split_activation_rows(x.data(), shape.k, digits, 0, m, rows.x);
    } else {
      prepare_activations(rows.x, m, shape.k, shape.k_padded, shape.group);
      quantize_activations(x.data(), shape.k, rows.x);
    }
    rows.out.resize(static_cast<std::size_t>(m * columns * sizeof(float)));
    std::memset(rows.out.data(), 0, rows.out.size());
    if (shape.epilogue.residual) rows.residual = pseudo_random(m * columns, 5, 1.f);
    rows_.push_back(std::move(rows));
  }
}

void KernelBench::call(const GemmGenerator& code, std::size_t i, ThreadSplit split) {
  Rows& rows = rows_[i];
  GemmCallArgs call;
  if (shape_.weight_only()) {
    set_call_operand(call, rows.xf);
  } else {
    call.a = rows.x.xq.data();
    call.a_scale = rows.x.scale.data();
    call.a_sums = rows.x.group_sums.data();
  }
  call.b = weights_.data() + std::int64_t{next_copy_} * weight_bytes_;
  call.c = rows.out.data();
  call.bias = shape_.epilogue.bias ? bias_.data() : nullptr;
  call.residual = shape_.epilogue.residual ? rows.residual.data() : nullptr;
  call.c_stride = shape_.n;
  call.residual_stride = shape_.n;
  call.m = shape_.weight_only() ? ms_[i] : rows.x.m;  // a split key: the digit rows
  call.out_scale = 0.05f;
  call.out_zero_point = 128.f;
  next_copy_ = next_copy_ + 1 == copies_ ? 0 : next_copy_ + 1;
  const double ops = 2.0 * double(ms_[i]) * double(shape_.n) * double(shape_.k);
  const CallRows call_rows = shape_.weight_only() ? call_rows_of(rows.xf, shape_.epilogue)
                                                  : call_rows_of(rows.x, shape_.epilogue);
  const CallUnits units{shape_.units(), weight_bytes_ / shape_.units(), code.key().blocking.nr};
  const GemmKernelFn fn = code.kernel();
  run_split(call, units, ops, call_rows, split, pool_,
            [fn](const GemmCallArgs& part) { fn(&part); });
}

double KernelBench::time_calls(const GemmGenerator& code, std::size_t i, int calls,
                               ThreadSplit split) {
  const auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < calls; ++c) call(code, i, split);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds * 1e6 / calls;
}

}  // namespace qforge
