// Reading the fields of a ggml block: a byte, and an f16 at any (unaligned) address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "jit/base/half_float.h"

namespace qforge {

inline std::uint8_t block_u8(const std::byte* p, std::size_t i) {
  return std::to_integer<std::uint8_t>(p[i]);
}

inline float block_f16(const std::byte* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

}  // namespace qforge
