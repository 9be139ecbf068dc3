#include "ops/linear/quantized_linear.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <optional>

#include "jit/base/error.h"
#include "jit/gemm/amx_thread_state.h"
#include "jit/gemm/register_budget.h"
#include "jit/tune/active_tuning.h"
#include "ops/linear/call_split.h"
#include "ops/quant/split_activations.h"
#include "ops/ref/gemm_reference.h"

namespace qforge {
namespace {

// Rows standing for the large M bucket (a prefill chunk).
constexpr std::int64_t kLargeBucketRows = 128;

std::atomic<std::int64_t> g_amx_min_rows{kDefaultAmxMinRows};

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

namespace {

std::atomic<WeightOnlyMath> g_weight_only_math{WeightOnlyMath::automatic};
std::once_flag g_weight_only_math_env;

// Whether an int4 weight-only layer on `isa` multiplies bf16 pairs (vdpbf16ps): on zmm
// only, with AVX512-BF16 native (automatic, bf16) or provided by the emulator (bf16).
bool bf16_math_for(const PackedWeights& w, Isa isa, WeightOnlyMath math) {
  if (math == WeightOnlyMath::f32 || w.bits() != 4 || isa != Isa::avx512_vnni || !isa_usable(isa))
    return false;
  return bf16_weight_only_native() || (math == WeightOnlyMath::bf16 && bf16_weight_only_runs());
}

}  // namespace

bool bf16_weight_only_native() {
  const CpuInfo& cpu = cpu_info();
  return cpu.isa.avx512_bf16 && (hardware_isa_mask(cpu) & isa_bit(Isa::avx512_vnni)) &&
         isa_usable(Isa::avx512_vnni);
}

bool amx_bf16_runs() {
  return isa_usable(Isa::amx) &&
         (cpu_info().isa.amx_bf16 || (emulated_isa_mask() & isa_bit(Isa::amx)));
}

bool bf16_weight_only_runs() {
  return bf16_weight_only_native() ||
         ((emulated_isa_mask() & isa_bit(Isa::avx512_vnni)) && isa_usable(Isa::avx512_vnni));
}

WeightOnlyMath parse_weight_only_math(const std::string& name, const std::string& where) {
  if (name == "auto") return WeightOnlyMath::automatic;
  if (name == "f32") return WeightOnlyMath::f32;
  if (name == "bf16") return WeightOnlyMath::bf16;
  fail(where, ": '", name, "' is not one of auto|f32|bf16");
}

WeightOnlyMath weight_only_math() {
  std::call_once(g_weight_only_math_env, [] {
    if (const char* env = std::getenv("QFORGE_WOQ_MATH"); env != nullptr && *env != '\0')
      g_weight_only_math.store(parse_weight_only_math(env, "QFORGE_WOQ_MATH"));
  });
  return g_weight_only_math.load();
}

void set_weight_only_math(WeightOnlyMath math) {
  weight_only_math();  // the environment is read first, so the call wins
  g_weight_only_math.store(math);
}

std::int64_t amx_min_rows() {
  return g_amx_min_rows.load(std::memory_order_relaxed);
}

void set_amx_min_rows(std::int64_t rows) {
  QF_REQUIRE(rows >= 1, "linear: the AMX row threshold must be at least 1, got ", rows);
  g_amx_min_rows.store(rows, std::memory_order_relaxed);
}

// The resolved plans of a layer, per M bucket and AMX or not, and the tuning state
// (table generation, thresholds) they were resolved under.
struct QuantizedLinear::CallPlans {
  std::mutex mutex;
  std::uint64_t generation = 0;
  std::int64_t amx_min = 0;
  std::int64_t gemm_min = 0;
  bool valid = false;
  std::optional<CallPlan> plans[3][2];  // [MBucket][on AMX tiles]
  std::optional<CallPlan> split;        // one-row weight-only calls, split
  std::uint64_t split_generation = 0;
};

QuantizedLinear::QuantizedLinear(PackedWeights weights, Epilogue epilogue, Isa isa,
                                 ActivationKind activation)
    : weights_(std::move(weights)),
      epilogue_(epilogue),
      isa_(isa),
      activation_(activation),
      plans_(std::make_unique<CallPlans>()) {
  QF_REQUIRE(epilogue.swiglu == (weights_.header.interleaved_pair != 0),
             "linear: swiglu needs interleaved gate/up weights and nothing else does");
  // Weight-only kernels are FMA on zmm or ymm (tiles only for bf16 math: below), and the
  // ymm VNNI ISA would only duplicate the AVX2 kernel.
  const bool amx_requested = isa_ == Isa::amx;
  // One-row weight-only calls split into two digit rows on the VNNI ISA asked for
  // (automatic math only), where its generator serves the split key. Two digits keep x to
  // 1/64516 of its row's largest value, far inside the int8 weights' own rounding (1/254
  // of theirs), and read faster than three on Zen 4 (docs/PERFORMANCE.md, "Zen 4: two
  // digit rows for int8").
  if (weight_only() && weight_only_math() == WeightOnlyMath::automatic &&
      activation_ != ActivationKind::bf16) {
    const Isa vnni = isa_ == Isa::amx ? Isa::avx512_vnni : isa_;
    if ((vnni == Isa::avx512_vnni || vnni == Isa::avx_vnni) && isa_usable(vnni)) {
      split_isa_ = vnni;
      split_digits_ = kWeightOnlySplitDigits;
      try {
        CodeCache::global().get(split_key());
      } catch (const Error& e) {
        report_fallback_once(split_key(), isa_, e.what());
        split_digits_ = 0;
      }
    }
  }
  if (weight_only() && isa_ == Isa::amx) isa_ = Isa::avx512_vnni;
  if (weight_only() && isa_ == Isa::avx_vnni) isa_ = Isa::avx2;
  // int4 weight-only layers on zmm multiply bf16 pairs where the CPU has AVX512-BF16
  // (weight_only_math()); a bf16 request that cannot be met runs the f32 kernels.
  if (weight_only()) {
    const WeightOnlyMath math =
        activation_ == ActivationKind::bf16 ? WeightOnlyMath::bf16 : weight_only_math();
    activation_ = bf16_math_for(weights_, isa_, math) ? ActivationKind::bf16 : ActivationKind::f32;
  }
  // AMX runs the calls of at least amx_min_rows() rows; the zmm kernels run the others,
  // and every call of a layer the AMX generator cannot serve (e.g. groups of 32). A
  // weight-only layer goes on tiles with bf16 math (int4) where AMX-BF16 runs.
  const bool want_amx =
      amx_requested && isa_usable(Isa::amx) &&
      (!weight_only() || (activation_ == ActivationKind::bf16 && amx_bf16_runs()));
  if (isa_ == Isa::amx) isa_ = Isa::avx512_vnni;
  // Find the first ISA whose generator serves this layer.
  while (isa_ != Isa::reference) {
    try {
      CodeCache::global().get(key_for(1));
      break;
    } catch (const Error& e) {
      const Isa next = activation_ == ActivationKind::bf16 ? isa_ : next_isa(isa_);
      report_fallback_once(key_for(1), next, e.what());
      if (activation_ == ActivationKind::bf16)
        activation_ = ActivationKind::f32;  // the f32 kernels of the same ISA next
      else
        isa_ = next;
    }
  }
  if (want_amx && isa_ == Isa::avx512_vnni &&
      (!weight_only() || activation_ == ActivationKind::bf16)) {
    const GemmKey tiles =
        gemm_key_for(weights_.header, epilogue_, Isa::amx, kLargeBucketRows, activation_);
    try {
      CodeCache::global().get(tiles);
      amx_ = true;
    } catch (const Error& e) {
      report_fallback_once(tiles, isa_, e.what());
    }
  }
}

QuantizedLinear::QuantizedLinear(QuantizedLinear&&) noexcept = default;
QuantizedLinear& QuantizedLinear::operator=(QuantizedLinear&&) noexcept = default;
QuantizedLinear::~QuantizedLinear() = default;

GemmKey gemm_key_for(const PackedHeader& h, const Epilogue& epilogue, Isa isa, std::int64_t m,
                     ActivationKind activation) {
  GemmKey key;
  key.activation = activation;
  key.isa = isa;
  key.n = h.n;
  key.k = h.k;
  key.k_padded = h.k_padded;
  key.group = h.group;
  key.bits = h.bits;
  key.asymmetric = h.asymmetric != 0;
  key.superblock_groups = h.superblock_groups;
  key.epilogue = epilogue;
  // A split key's tile is one row's digit rows: the small bucket's kernels.
  key.bucket = key.split_digits() != 0
                   ? MBucket::small
                   : bucket_of(m, tuned_gemm_min_rows(key).value_or(kDefaultGemmMinRows));
  key.woq_chains = weight_only_gemv_chains(cpu_info(), key);
  key.blocking = tuned_blocking(key).value_or(default_blocking(key));
  return key;
}

GemmKey QuantizedLinear::key_for(std::int64_t m) const {
  const Isa isa = amx_ && m >= amx_min_rows() ? Isa::amx : isa_;
  return gemm_key_for(weights_.header, epilogue_, isa, m, activation_);
}

GemmKey QuantizedLinear::split_key() const {
  QF_REQUIRE(split_digits_ != 0, "linear: this layer does not split its activations");
  return gemm_key_for(weights_.header, epilogue_, split_isa_, split_digits_,
                      split_digits_ == 3 ? ActivationKind::s8x3 : ActivationKind::s8x2);
}

QuantizedLinear::CallPlan QuantizedLinear::split_plan() const {
  CallPlans& p = *plans_;
  std::lock_guard lock(p.mutex);
  const std::uint64_t generation = tuning_generation();
  if (!p.split || p.split_generation != generation) {
    p.split = CallPlan{CodeCache::global().get(split_key()).code, ThreadSplit::units};
    p.split_generation = generation;
  }
  return *p.split;
}

QuantizedLinear::CallPlan QuantizedLinear::plan_for(std::int64_t m) const {
  CallPlans& p = *plans_;
  std::lock_guard lock(p.mutex);
  const std::uint64_t generation = tuning_generation();
  const std::int64_t amx_min = amx_min_rows();
  if (!p.valid || p.generation != generation || p.amx_min != amx_min) {
    p.valid = true;
    p.generation = generation;
    p.amx_min = amx_min;
    p.gemm_min = tuned_gemm_min_rows(key_for(1)).value_or(kDefaultGemmMinRows);
    for (auto& bucket : p.plans)
      for (auto& plan : bucket) plan.reset();
  }
  const bool tiles = amx_ && m >= amx_min;
  std::optional<CallPlan>& plan = p.plans[static_cast<int>(bucket_of(m, p.gemm_min))][tiles];
  if (!plan) {
    const CompiledKernel kernel = CodeCache::global().get(key_for(m));
    const GemmKey& used = kernel.code->key();
    // Large-M calls split as tuned (by units unless the table says rows); see call_split.h.
    const ThreadSplit split = used.bucket == MBucket::large
                                  ? tuned_thread_split(used).value_or(ThreadSplit::units)
                                  : ThreadSplit::units;
    plan = CallPlan{kernel.code, split};
  }
  return *plan;
}

std::vector<GemmKey> QuantizedLinear::warmup_keys() const {
  if (isa_ == Isa::reference) return {};
  // Every (M bucket, AMX or not) a call can pick: each bucket's first and last row count
  // (1 | 2 .. G-1 | G.., G the GEMV/GEMM threshold) and the AMX threshold.
  const std::int64_t gemm_min = tuned_gemm_min_rows(key_for(1)).value_or(kDefaultGemmMinRows);
  std::vector<GemmKey> keys;
  for (const std::int64_t m : {std::int64_t{1}, std::int64_t{2}, gemm_min - 1, gemm_min,
                               kLargeBucketRows, amx_min_rows()}) {
    const GemmKey key = key_for(m);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  if (split_digits_ != 0) keys.push_back(split_key());
  return keys;
}

namespace {

// The call's activation operand: s8 rows with their scales and sums, or f32 rows.
void set_operand(GemmCallArgs& call, const QuantizedActivations& x) {
  call.a = x.xq.data();
  call.a_scale = x.scale.data();
  call.a_sums = x.group_sums.data();
}
void set_operand(GemmCallArgs& call, const FloatActivations& x) {
  set_call_operand(call, x);
}

}  // namespace

template <typename Activations>
void QuantizedLinear::run(const Activations& x, const EpilogueArgs& args, void* out,
                          std::int64_t ldc, ThreadPool& pool, const CallPlan* split) const {
  if (isa_ == Isa::reference) {
    gemm_reference(weights_, x, epilogue_, args, out, ldc);
    return;
  }
  QF_REQUIRE(x.k == weights_.k() && x.k_padded == weights_.header.k_padded &&
                 x.group == weights_.header.group,
             "linear: activations do not match the weights (K ", x.k, " vs ", weights_.k(), ")");
  GemmCallArgs call;
  set_operand(call, x);
  call.b = weights_.data.data();
  call.c = out;
  call.bias = args.bias;
  call.residual = args.residual;
  call.c_stride = ldc;
  call.residual_stride = args.ld_residual;
  call.m = x.m;
  call.out_scale = args.out_scale;
  call.out_zero_point = static_cast<float>(args.out_zero_point);
  const CallPlan plan = split != nullptr ? *split : plan_for(x.m);
  const std::int64_t units = (weights_.n() + 15) / 16;
  const GemmKernelFn fn = plan.code->kernel();
  const bool tiles = plan.code->key().isa == Isa::amx;
  auto run_part = [&](const GemmCallArgs& part) {
    if (tiles)
      note_amx_tiles_in_use();
    else
      release_amx_tiles();
    fn(&part);
  };
  const double ops = 2.0 * double(x.m) * double(weights_.n()) * double(weights_.k());
  const CallUnits call_units{units, weights_.geometry.total_bytes / units,
                             plan.code->key().blocking.nr};
  run_split(call, call_units, ops, call_rows_of(x, epilogue_), plan.split, pool, run_part);
}

void QuantizedLinear::forward(const QuantizedActivations& x, const EpilogueArgs& args, void* out,
                              std::int64_t ldc, ThreadPool& pool) const {
  QF_REQUIRE(!weight_only(), "linear: a weight-only layer takes f32 activations");
  run(x, args, out, ldc, pool);
}

void QuantizedLinear::forward(const FloatActivations& x, const EpilogueArgs& args, void* out,
                              std::int64_t ldc, ThreadPool& pool) const {
  QF_REQUIRE(weight_only(), "linear: an int8-activation layer takes quantized activations");
  QF_REQUIRE(x.bits == weights_.bits(), "linear: f32 activations laid out for ", x.bits,
             "-bit weights, the layer's are ", weights_.bits(), "-bit");
  QF_REQUIRE(x.bf16 == (activation_ == ActivationKind::bf16), "linear: ", x.bf16 ? "bf16" : "f32",
             " activations for a layer whose kernels take ", activation_name(activation_));
  run(x, args, out, ldc, pool);
}

void QuantizedLinear::forward(const float* x, std::int64_t m, std::int64_t ldx,
                              QuantizedActivations& scratch, const EpilogueArgs& args, void* out,
                              std::int64_t ldc, ThreadPool& pool, float static_scale) const {
  prepare_activations(scratch, m, weights_.k(), weights_.header.k_padded, weights_.header.group);
  quantize_split(x, ldx, static_scale, scratch, pool);
  forward(scratch, args, out, ldc, pool);
}

void QuantizedLinear::forward_normalized(const float* x, std::int64_t m, std::int64_t ldx,
                                         const RmsNorm& norm, QuantizedActivations& scratch,
                                         const EpilogueArgs& args, void* out, std::int64_t ldc,
                                         ThreadPool& pool, float static_scale) const {
  prepare_activations(scratch, m, weights_.k(), weights_.header.k_padded, weights_.header.group);
  quantize_normalized_split(x, ldx, norm, static_scale, scratch, pool);
  forward(scratch, args, out, ldc, pool);
}

void QuantizedLinear::forward_weight_only(const float* x, std::int64_t m, std::int64_t ldx,
                                          FloatActivations& scratch, const EpilogueArgs& args,
                                          void* out, std::int64_t ldc, ThreadPool& pool) const {
  if (m == 1 && split_digits_ != 0 && isa_ != Isa::reference) {
    QuantizedActivations& digits = scratch.split_rows;
    prepare_split_activations(digits, split_digits_, 1, weights_.k(), weights_.header.k_padded,
                              weights_.header.group);
    split_activation_rows(x, ldx, split_digits_, 0, 1, digits);
    const CallPlan plan = split_plan();
    run(digits, args, out, ldc, pool, &plan);
    return;
  }
  prepare_float_activations(scratch, m, weights_.k(), weights_.header.k_padded,
                            weights_.header.group, weights_.bits(),
                            activation_ == ActivationKind::bf16);
  copy_float_activation_rows(x, ldx, 0, m, scratch);
  forward(scratch, args, out, ldc, pool);
}

namespace {

// rows(first, count) over contiguous blocks of out's rows, one per thread for large calls;
// a thread's error (a non-finite input) is rethrown here, the first row's first.
template <typename QuantizeRows>
void split_rows(const QuantizedActivations& out, ThreadPool& pool, const QuantizeRows& rows) {
  const std::int64_t parts =
      out.m >= kSplitQuantizeRows && out.m * out.k >= kSplitQuantizeValues ? pool.size() : 1;
  if (parts == 1) {
    rows(0, out.m);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(parts));
  pool.run([&](int t) {
    const std::int64_t first = out.m * t / parts, end = out.m * (t + 1) / parts;
    try {
      rows(first, end - first);
    } catch (...) {
      errors[static_cast<std::size_t>(t)] = std::current_exception();
    }
  });
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace

void quantize_split(const float* x, std::int64_t ldx, float static_scale, QuantizedActivations& out,
                    ThreadPool& pool) {
  split_rows(out, pool, [&](std::int64_t first, std::int64_t count) {
    quantize_activation_rows(x, ldx, static_scale, first, count, out);
  });
}

void quantize_normalized_split(const float* x, std::int64_t ldx, const RmsNorm& norm,
                               float static_scale, QuantizedActivations& out, ThreadPool& pool) {
  split_rows(out, pool, [&](std::int64_t first, std::int64_t count) {
    quantize_normalized_rows(x, ldx, norm, static_scale, first, count, out);
  });
}

}  // namespace qforge
