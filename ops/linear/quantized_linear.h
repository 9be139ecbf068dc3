// A quantized linear layer: packed weights + the epilogue fused into its kernel, called
// through the code cache and split across the thread pool (call_split.h: by output units,
// or by rows for large M where the tuning table says so).
//
//   x (f32, M x K) --quantize_activations--> xu, a, xsum --kernel(s)--> y (epilogue)
//   or rmsnorm(x)  --quantize_normalized_rows--^  (the norm fused into the quantizing pass)
//   weight-only:   --copy_float_activation_rows--> x, xsum --kernel(s)--> y
//
// The kernel ISA is the best usable one (QFORGE_MAX_ISA / --max-isa honoured); a
// generator that cannot serve a key falls back zmm -> ymm VNNI -> ymm AVX2 -> reference,
// and the fallback is reported once on stderr. With AMX usable, calls of at least
// amx_min_rows() rows run the AMX kernel and smaller ones (decode) the zmm kernels; a
// layer the AMX generator cannot serve stays on zmm. Weight-only layers run the FMA
// kernels on zmm (AVX-512) or ymm (AVX2), int4 ones vdpbf16ps on zmm where the CPU has
// AVX512-BF16 (weight_only_math), never on tiles. Their one-row (decode) calls on a VNNI
// ISA split the row into two s8 digit rows (kWeightOnlySplitDigits;
// ops/quant/split_activations.h) and run the integer kernels on them (a split key).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "jit/core/code_cache.h"
#include "jit/gemm/gemm_key.h"
#include "ops/linear/thread_pool.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"
#include "ops/quant/pack.h"

namespace qforge {

// The kernel key for packed weights with `header`, run with `epilogue` on `isa` for M
// rows; the M bucket follows the table's GEMV/GEMM threshold for the shape (default
// kDefaultGemmMinRows) and the blocking is the installed tuning table's
// (jit/tune/active_tuning.h) when it has one for the key, else the analytic default.
GemmKey gemm_key_for(const PackedHeader& header, const Epilogue& epilogue, Isa isa, std::int64_t m,
                     ActivationKind activation = ActivationKind::s8);

// The M at and above which calls run on AMX tiles (default kDefaultAmxMinRows): a tuning
// parameter, the row count at which AMX overtakes the zmm kernels on this CPU.
inline constexpr std::int64_t kDefaultAmxMinRows = 16;
std::int64_t amx_min_rows();
void set_amx_min_rows(std::int64_t rows);  // rows >= 1

// The digit rows a one-row weight-only call splits into (split_activations.h), int8 and
// int4 weights alike; the generator also serves three (s8x3: x to f32's own rounding).
inline constexpr int kWeightOnlySplitDigits = 2;

// Quantizes x into `out` (prepared for its M rows): calls of at least kSplitQuantizeRows
// rows and kSplitQuantizeValues values split their rows over the pool's threads
// (prefill), smaller ones run on the caller (waking the pool costs more than they take).
// static_scale 0: per-row scales. Bit-identical to one quantize_activations call. Not
// from inside a task of the same pool (ThreadPool::run does not nest).
inline constexpr std::int64_t kSplitQuantizeRows = 8;
inline constexpr std::int64_t kSplitQuantizeValues = std::int64_t{1} << 16;
void quantize_split(const float* x, std::int64_t ldx, float static_scale, QuantizedActivations& out,
                    ThreadPool& pool);
// The same split over the rows of rmsnorm(x) (quantize_normalized_rows: the normalized rows
// stay in each thread's cache).
void quantize_normalized_split(const float* x, std::int64_t ldx, const RmsNorm& norm,
                               float static_scale, QuantizedActivations& out, ThreadPool& pool);

// How weight-only layers multiply. int4 on zmm: f32 FMA on the f32 rows, or vdpbf16ps on
// the rows rounded to bf16 (AVX512-BF16; the int4 operands are exact in bf16, so only x
// is rounded). automatic (the default): bf16 where the CPU runs AVX512-BF16 natively, and
// one-row calls on a VNNI ISA split into s8 digit rows (split_activations.h); bf16: bf16
// also under the emulator, no split; f32: f32 FMA for every call. Int8 weight-only layers
// run f32 FMA where they do not split. Read once from QFORGE_WOQ_MATH (auto|f32|bf16);
// set_weight_only_math() (--woq-math) overrides it for layers built afterwards.
enum class WeightOnlyMath { automatic, f32, bf16 };
// The bf16 kernels run here: AVX512-BF16 natively (zmm usable under the cap) ...
bool bf16_weight_only_native();
// ... or zmm through the emulator (which provides AVX512-BF16 with the rest of AVX-512).
// A CPU with native AVX-512 but no AVX512-BF16 can run neither.
bool bf16_weight_only_runs();
// AMX-BF16 (tdpbf16ps) runs here: AMX usable, with AMX-BF16 native or emulated. Prefill
// calls of bf16 weight-only layers then run on tiles.
bool amx_bf16_runs();
WeightOnlyMath parse_weight_only_math(const std::string& name, const std::string& where);
WeightOnlyMath weight_only_math();
void set_weight_only_math(WeightOnlyMath math);

class QuantizedLinear {
 public:
  QuantizedLinear(PackedWeights weights, Epilogue epilogue, Isa isa = best_isa(),
                  ActivationKind activation = ActivationKind::s8);
  QuantizedLinear(QuantizedLinear&&) noexcept;
  QuantizedLinear& operator=(QuantizedLinear&&) noexcept;
  ~QuantizedLinear();

  // The key used for M rows (blocking as gemm_key_for chooses it).
  GemmKey key_for(std::int64_t m) const;
  // Keys for the M buckets a model will use (for CodeCache::warmup).
  std::vector<GemmKey> warmup_keys() const;

  // y = epilogue(x W^T); x is already quantized (row layout matching the weights).
  void forward(const QuantizedActivations& x, const EpilogueArgs& args, void* out, std::int64_t ldc,
               ThreadPool& pool) const;
  // Quantizes x (M x K, leading dimension ldx) into `scratch` first (quantize_split),
  // per row, or with `static_scale` (> 0) for every row.
  void forward(const float* x, std::int64_t m, std::int64_t ldx, QuantizedActivations& scratch,
               const EpilogueArgs& args, void* out, std::int64_t ldc, ThreadPool& pool,
               float static_scale = 0.f) const;

  // y = epilogue(rmsnorm(x) W^T): the norm is applied while quantizing (no f32 copy of
  // the normalized rows), bit for bit rmsnorm into a buffer and forward() of it.
  void forward_normalized(const float* x, std::int64_t m, std::int64_t ldx, const RmsNorm& norm,
                          QuantizedActivations& scratch, const EpilogueArgs& args, void* out,
                          std::int64_t ldc, ThreadPool& pool, float static_scale = 0.f) const;

  // Weight-only layers: y = epilogue(x W^T) with x the f32 rows (prepared for the weights).
  void forward(const FloatActivations& x, const EpilogueArgs& args, void* out, std::int64_t ldc,
               ThreadPool& pool) const;
  // Copies x (M x K, leading dimension ldx) into `scratch` first; a one-row call of a
  // layer with split_digits() splits it into scratch.split_rows and runs the split key.
  void forward_weight_only(const float* x, std::int64_t m, std::int64_t ldx,
                           FloatActivations& scratch, const EpilogueArgs& args, void* out,
                           std::int64_t ldc, ThreadPool& pool) const;

  const PackedWeights& weights() const { return weights_; }
  // Moves the packed weights into the next piece of `arena` (huge_page_arena.h); calls
  // read them from there.
  void move_weights_into(const std::shared_ptr<HugePageArena>& arena) {
    weights_.data.move_into(arena);
  }
  ActivationKind activation() const { return activation_; }
  // D digit rows a one-row weight-only call is split into (0: not split).
  int split_digits() const { return split_digits_; }
  // The key of those calls (split_digits() > 0).
  GemmKey split_key() const;
  bool weight_only() const { return activation_ != ActivationKind::s8; }
  const Epilogue& epilogue() const { return epilogue_; }
  Isa isa() const { return isa_; }  // the vector ISA (M below the AMX threshold)
  bool uses_amx() const { return amx_; }

  // What a call of M rows runs: the kernel and how it is split over the pool. Resolved
  // from the tuning table and the code cache on the first call of its bucket (AMX or
  // not) after the table or the AMX threshold changed, not on every call.
  struct CallPlan {
    std::shared_ptr<const GemmGenerator> code;
    ThreadSplit split = ThreadSplit::units;
  };
  CallPlan plan_for(std::int64_t m) const;

 private:
  // The call over either kind of activations (the reference path, or the plan's kernel
  // split over the pool): plan_for(x.m)'s, or `split`'s for a split call's digit rows.
  template <typename Activations>
  void run(const Activations& x, const EpilogueArgs& args, void* out, std::int64_t ldc,
           ThreadPool& pool, const CallPlan* split = nullptr) const;
  CallPlan split_plan() const;
  struct CallPlans;

  PackedWeights weights_;
  Epilogue epilogue_;
  Isa isa_;
  ActivationKind activation_;
  bool amx_ = false;
  Isa split_isa_ = Isa::reference;  // of the split key
  int split_digits_ = 0;
  std::unique_ptr<CallPlans> plans_;
};

}  // namespace qforge
