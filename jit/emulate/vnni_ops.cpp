// VNNI dot products, VEX (AVX-VNNI, xmm/ymm) and EVEX (AVX512-VNNI, with opmask and
// {1to16} broadcast of the second source): each dword of the destination accumulates
// the dot product of the 4 bytes / 2 words at the same position in the two sources.
//
//   vpdpbusd(s)  acc += sum_{j<4} u8(src1.byte[4i+j]) * s8(src2.byte[4i+j])
//   vpdpwssd(s)  acc += sum_{j<2} s16(src1.word[2i+j]) * s16(src2.word[2i+j])
//
// The plain forms wrap around in int32; the "s" forms saturate to int32.
#include <cstdint>

#include "jit/emulate/elementwise.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

std::uint32_t finish(std::int64_t sum, bool saturating) {
  return saturating ? static_cast<std::uint32_t>(saturate<std::int32_t>(sum))
                    : static_cast<std::uint32_t>(sum);
}

template <bool kSaturating>
Status dot_u8_s8(Operation& op) {
  return map_ternary<std::uint32_t>(op, [](std::uint32_t acc, std::uint32_t a, std::uint32_t b) {
    std::int64_t sum = static_cast<std::int32_t>(acc);
    for (unsigned j = 0; j < 4; ++j) {
      const std::int64_t ua = static_cast<std::uint8_t>(a >> (8 * j));
      const std::int64_t sb = static_cast<std::int8_t>(b >> (8 * j));
      sum += ua * sb;
    }
    return finish(sum, kSaturating);
  });
}

template <bool kSaturating>
Status dot_s16_s16(Operation& op) {
  return map_ternary<std::uint32_t>(op, [](std::uint32_t acc, std::uint32_t a, std::uint32_t b) {
    std::int64_t sum = static_cast<std::int32_t>(acc);
    for (unsigned j = 0; j < 2; ++j) {
      const std::int64_t sa = static_cast<std::int16_t>(a >> (16 * j));
      const std::int64_t sb = static_cast<std::int16_t>(b >> (16 * j));
      sum += sa * sb;
    }
    return finish(sum, kSaturating);
  });
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VPDPBUSD, dot_u8_s8<false>},
    {ZYDIS_MNEMONIC_VPDPBUSDS, dot_u8_s8<true>},
    {ZYDIS_MNEMONIC_VPDPWSSD, dot_s16_s16<false>},
    {ZYDIS_MNEMONIC_VPDPWSSDS, dot_s16_s16<true>},
};

}  // namespace

std::span<const OpEntry> vnni_ops() {
  return kOps;
}

}  // namespace qforge::emulate
