#include "ops/linear/quantized_linear.h"

#include <cstdio>
#include <mutex>

#include "jit/base/error.h"
#include "jit/gemm/register_budget.h"
#include "ops/ref/gemm_reference.h"

namespace qforge {
namespace {

// Below this many operations per thread, splitting a call costs more than it saves.
constexpr double kMinOpsPerThread = 1 << 20;

// zmm -> ymm VNNI -> ymm AVX2 -> reference (Isa::reference)
Isa next_isa(Isa isa) {
  switch (isa) {
    case Isa::amx:
    case Isa::avx512_vnni:
      return isa_usable(Isa::avx_vnni) ? Isa::avx_vnni : next_isa(Isa::avx_vnni);
    case Isa::avx_vnni:
      return isa_usable(Isa::avx2) ? Isa::avx2 : Isa::reference;
    default:
      return Isa::reference;
  }
}

void report_fallback_once(const GemmKey& key, Isa to, const char* why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr, "qforge: %s cannot be generated (%s); falling back to %s kernels\n",
                 kernel_name(key).c_str(), why, std::string(isa_name(to)).c_str());
  });
}

}  // namespace

QuantizedLinear::QuantizedLinear(PackedWeights weights, Epilogue epilogue, Isa isa)
    : weights_(std::move(weights)), epilogue_(epilogue), isa_(isa) {
  QF_REQUIRE(epilogue.swiglu == (weights_.header.interleaved_pair != 0),
             "linear: swiglu needs interleaved gate/up weights and nothing else does");
  // AMX has its own generator; until it is selected, its layers run the zmm kernels.
  if (isa_ == Isa::amx) isa_ = Isa::avx512_vnni;
  // Find the first ISA whose generator serves this layer.
  while (isa_ != Isa::reference) {
    try {
      CodeCache::global().get(key_for(1));
      break;
    } catch (const Error& e) {
      const Isa next = next_isa(isa_);
      report_fallback_once(key_for(1), next, e.what());
      isa_ = next;
    }
  }
}

GemmKey gemm_key_for(const PackedHeader& h, const Epilogue& epilogue, Isa isa, std::int64_t m) {
  GemmKey key;
  key.isa = isa;
  key.n = h.n;
  key.k = h.k;
  key.k_padded = h.k_padded;
  key.group = h.group;
  key.bits = h.bits;
  key.asymmetric = h.asymmetric != 0;
  key.epilogue = epilogue;
  key.bucket = bucket_of(m);
  key.blocking = default_blocking(key);
  return key;
}

GemmKey QuantizedLinear::key_for(std::int64_t m) const {
  return gemm_key_for(weights_.header, epilogue_, isa_, m);
}

std::vector<GemmKey> QuantizedLinear::warmup_keys() const {
  if (isa_ == Isa::reference) return {};
  return {key_for(1), key_for(4), key_for(128)};
}

void QuantizedLinear::forward(const QuantizedActivations& x, const EpilogueArgs& args, void* out,
                              std::int64_t ldc, ThreadPool& pool) const {
  if (isa_ == Isa::reference) {
    gemm_reference(weights_, x, epilogue_, args, out, ldc);
    return;
  }
  QF_REQUIRE(x.k == weights_.k() && x.k_padded == weights_.header.k_padded &&
                 x.group == weights_.header.group,
             "linear: activations do not match the weights (K ", x.k, " vs ", weights_.k(), ")");
  const CompiledKernel kernel = CodeCache::global().get(key_for(x.m));
  GemmCallArgs call;
  call.a = x.xu.data();
  call.a_scale = x.scale.data();
  call.a_sums = x.group_sums.data();
  call.b = weights_.data.data();
  call.c = out;
  call.bias = args.bias;
  call.residual = args.residual;
  call.c_stride = ldc;
  call.residual_stride = args.ld_residual;
  call.m = x.m;
  call.out_scale = args.out_scale;
  call.out_zero_point = static_cast<float>(args.out_zero_point);
  const std::int64_t units = (weights_.n() + 15) / 16;
  const GemmKernelFn fn = kernel.fn();
  // Small calls (a tiny layer, one token) cost less on one thread than waking the pool.
  const double ops = 2.0 * double(x.m) * double(weights_.n()) * double(weights_.k());
  if (ops < kMinOpsPerThread * 2 || pool.size() == 1) {
    call.unit_begin = 0;
    call.unit_end = units;
    fn(&call);
    return;
  }
  const int threads = pool.size();
  pool.run([&](int t) {
    GemmCallArgs mine = call;
    mine.unit_begin = units * t / threads;
    mine.unit_end = units * (t + 1) / threads;
    if (mine.unit_end > mine.unit_begin) fn(&mine);
  });
}

void QuantizedLinear::forward(const float* x, std::int64_t m, std::int64_t ldx,
                              QuantizedActivations& scratch, const EpilogueArgs& args, void* out,
                              std::int64_t ldc, ThreadPool& pool) const {
  prepare_activations(scratch, m, weights_.k(), weights_.header.k_padded, weights_.header.group);
  quantize_activations(x, ldx, scratch);
  forward(scratch, args, out, ldc, pool);
}

}  // namespace qforge
