#include "jit/gemm/tile_streaming.h"

namespace qforge {

namespace {
// Family 19h covers Zen 3 and Zen 4; only Zen 4 implements AVX-512.
bool is_zen4(const CpuInfo& cpu) {
  return cpu.vendor == "AuthenticAMD" && cpu.family == 0x19 && cpu.isa.avx512f;
}
}  // namespace

TileStreaming tile_streaming_for(const CpuInfo& cpu, const GemmKey& key) {
  const bool gemm = key.bucket == MBucket::large;
  const TileStreaming general = gemm ? kGeneralGemmStreaming : kGeneralDecodeStreaming;
  if (key.isa != Isa::avx512_vnni || !is_zen4(cpu)) return general;
  if (gemm) return key.bits < 8 && !key.weight_only() ? kZen4SubByteGemmStreaming : general;
  // A split key's tile is one row's digit rows: a GEMV, whose int8 panel streams far ahead
  // when it is not a pair, and whose broadcasts more units share once the digit rows
  // outgrow the narrow bound.
  if (key.split_digits() != 0) {
    if (key.bits == 8 && !key.epilogue.swiglu) return kZen4Int8SplitStreaming;
    return key.split_digits() * key.k_padded > kZen4NarrowSplitBytes ? kZen4WideSplitStreaming
                                                                     : kZen4GemvStreaming;
  }
  return key.bucket == MBucket::one ? kZen4GemvStreaming : kZen4DecodeStreaming;
}

bool weight_only_gemv_chains(const CpuInfo& cpu, const GemmKey& key) {
  return key.weight_only() && key.isa == Isa::avx512_vnni && key.bucket == MBucket::one &&
         is_zen4(cpu);
}

}  // namespace qforge
