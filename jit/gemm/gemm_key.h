// GemmKey: everything a generated kernel is specialised to. The fields are listed once
// (fields()); equality, hashing and the printable kernel name derive from that list.
//
//   gemm_u8s8_avx512vnni_n2048_k5632_g128_w4s_m1_1x8u4_deq-f32
//        isa ----^  N ----^  K ----^  g ^  ^bits+sym ^bucket ^MRxNR, K unroll ^epilogue
//   gemm_u8f32_... / gemm_u8bf16_...: a weight-only kernel (f32 / bf16 activations)
//   ..._g32x8_...: two-level scales, super-blocks of 8 groups (ops/quant/packed_layout.h)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>

#include "jit/cpu/isa.h"
#include "jit/kernel/epilogue.h"

namespace qforge {

// Which rows a kernel is tuned for. M itself is always a run-time argument.
enum class MBucket : std::uint8_t { one = 0, small, large };  // 1 | 2..4 | >= 5
// M from which calls run the GEMM (large-bucket) kernel rather than the GEMV one; a
// tuning parameter per shape (the tuner measures where the GEMM kernel overtakes).
inline constexpr std::int64_t kDefaultGemmMinRows = 5;
// 1 -> one; 2 .. gemm_min_rows - 1 -> small; from gemm_min_rows (>= 2) -> large.
MBucket bucket_of(std::int64_t m, std::int64_t gemm_min_rows = kDefaultGemmMinRows);
const char* bucket_name(MBucket bucket);

// Register tile and streaming parameters (the tuner's search space).
struct Blocking {
  int mr = 1;                 // rows per register tile
  int nr = 1;                 // output units (16 columns) per register tile
  int k_unroll = 4;           // 64-byte packed rows per K-loop iteration
  int prefetch_distance = 0;  // bytes ahead in each panel stream (0 = none)

  auto fields() const { return std::tie(mr, nr, k_unroll, prefetch_distance); }
  bool operator==(const Blocking& o) const { return fields() == o.fields(); }
};

// The kernel's A operand: per-token s8 rows (W8A8 / W4A8: integer dot products), or the
// f32 rows themselves (weight-only: the packed weights dequantized in registers, FMA), or
// the rows rounded to bf16 pairs (weight-only int4 on zmm: nibbles looked up as bf16,
// vdpbf16ps; AVX512-BF16), or each f32 row split into D s8 digit rows (weight-only decode
// on the integer dot products: ops/quant/split_activations.h):
//
//   x = a_0 q_0 + a_1 q_1 + ... + a_{D-1} q_{D-1} + r     (q_d s8 rows, a_d their scales)
//   y = sum_d a_d (q_d W^T)    the D digit rows a tile of D rows; the epilogue sums them
//                              (smallest first) into the one output row, then bias, SwiGLU,
//                              residual as for any row
enum class ActivationKind : std::uint8_t { s8 = 0, f32, bf16, s8x2, s8x3 };
// "s8" | "f32" | "bf16" | "s8x2" | "s8x3"
const char* activation_name(ActivationKind kind);
// D of a split kind (2, 3); 0 for the others.
int split_digits(ActivationKind kind);
// The kind named by `name`; throws qforge::Error naming `where` and the valid names.
ActivationKind parse_activation(const std::string& name, const std::string& where);

// 3: layout v3 (f16 trailers, u8 weights); 4: the bf16 weight-only kernels' table in a
// register; 5: one-level group scales converted once per group for all rows of the tile;
// 6: the prefetch stream handoff to the next unit block (gemm_generator.h); 7: a one-chain
// sub-byte zmm tile's high nibbles on a second accumulator; 8: a one-unit SwiGLU decode
// tile's panels read one after the other; 9: weight-only GEMV keys with four accumulator
// chains per vector; 10: split activations (s8x2, s8x3), on Zen 4 one unit a tile
inline constexpr int kGemmGeneratorVersion = 10;

struct GemmKey {
  Isa isa = Isa::avx2;
  std::int64_t n = 0;  // output columns (per half for a SwiGLU pair)
  std::int64_t k = 0;
  std::int64_t k_padded = 0;  // Kp
  std::int64_t group = 0;     // effective g (= Kp for per-channel / per-tensor)
  int bits = 8;
  bool asymmetric = false;
  int superblock_groups = 0;  // two-level scales: groups per super-block (0: one-level)
  ActivationKind activation = ActivationKind::s8;
  Epilogue epilogue;  // epilogue.swiglu => interleaved gate/up weights
  MBucket bucket = MBucket::one;
  // A weight-only zmm GEMV whose float sums run in four chains per vector (field or bf16
  // pair i of each packed row into chain i % 4, summed before each group correction;
  // gemm_generator.h): the key's, so every blocking the tuner tries sums in the same order.
  bool woq_chains = false;
  Blocking blocking;
  int version = kGemmGeneratorVersion;

  auto fields() const {
    return std::tie(isa, n, k, k_padded, group, bits, asymmetric, superblock_groups, activation,
                    epilogue, bucket, woq_chains, blocking, version);
  }
  bool operator==(const GemmKey& o) const { return fields() == o.fields(); }

  std::int64_t groups() const { return k_padded / group; }
  int panels_per_unit() const { return epilogue.swiglu ? 2 : 1; }
  std::int64_t units() const { return (n + 15) / 16; }
  // The float kernels (f32 / bf16 rows); a split key runs the integer inner loop.
  bool weight_only() const {
    return activation == ActivationKind::f32 || activation == ActivationKind::bf16;
  }
  int split_digits() const { return qforge::split_digits(activation); }
};

std::string kernel_name(const GemmKey& key);

struct GemmKeyHash {
  std::size_t operator()(const GemmKey& key) const;
};

}  // namespace qforge
