// EVEX conversions: int32 <-> float, float <-> fp16, float -> bf16, and the bf16 dot
// product vdpbf16ps.
//
//   fp16: s eeeee mmmmmmmmmm   (bias 15)    bf16: s eeeeeeee mmmmmmm   (top half of fp32)
#include <xmmintrin.h>

#include <cmath>
#include <cstdint>

#include "jit/emulate/float_bits.h"
#include "jit/emulate/float_env.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

// Converts element i of From to element i of To for the elements the vector length
// holds; the result fills n * sizeof(To) bytes of the destination (less than the vector
// for the narrowing conversions, the rest of a register is zeroed).
template <typename From, typename To, typename Fn>
Status convert(Operation& op, Fn fn) {
  const Vec a = op.source_masked(1);
  const unsigned n = op.vector_bytes() / (sizeof(From) > sizeof(To) ? sizeof(From) : sizeof(To));
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i) r.set<To>(i, fn(a.get<From>(i)));
  op.write_destination(r, n * sizeof(To));
  return Status::kDone;
}

bool daz_enabled(const Operation& op) {
  return op.guest_mxcsr() & kMxcsrDaz;
}

// int32 -> float, rounded by the host MXCSR (the guest's RC or embedded rounding).
Status int_to_float(Operation& op) {
  return convert<std::int32_t, float>(op, [](std::int32_t x) { return static_cast<float>(x); });
}

// float -> int32 as cvtss2si / cvttss2si: out-of-range and NaN give 0x80000000.
template <bool kTruncate>
Status float_to_int(Operation& op) {
  const bool daz = daz_enabled(op);
  return convert<float, std::int32_t>(op, [daz](float x) {
    const __m128 v = _mm_set_ss(denormal_as_zero(x, daz));
    return kTruncate ? _mm_cvttss_si32(v) : _mm_cvtss_si32(v);
  });
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const unsigned exponent = (h >> 10) & 0x1F;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {
    const std::uint32_t payload = mantissa ? FloatTraits<float>::kQuiet | (mantissa << 13) : 0;
    return from_bits<float>(sign | FloatTraits<float>::kExponent | payload);
  }
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact
    return from_bits<float>(sign | bits_of(magnitude));
  }
  return from_bits<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

// The value an overflowing fp16 conversion gives in each rounding mode.
std::uint16_t half_overflow(std::uint16_t sign, unsigned rounding) {
  constexpr std::uint16_t kInfinity = 0x7C00, kLargest = 0x7BFF;
  switch (rounding) {
    case kRoundNearest:
      return sign | kInfinity;
    case kRoundDown:
      return sign | (sign ? kInfinity : kLargest);
    case kRoundUp:
      return sign | (sign ? kLargest : kInfinity);
    default:
      return sign | kLargest;
  }
}

// float -> fp16 with one rounding in `rounding`; NaNs keep their top payload bits, quieted.
std::uint16_t float_to_half(float value, unsigned rounding, bool daz) {
  const std::uint32_t f = bits_of(value);
  const auto sign = static_cast<std::uint16_t>((f >> 16) & 0x8000u);
  const unsigned exponent = (f >> 23) & 0xFF;
  const std::uint32_t mantissa = f & 0x7FFFFFu;
  if (exponent == 0xFF) return sign | (mantissa ? 0x7E00 | (mantissa >> 13) : 0x7C00);
  if (exponent == 0 && (mantissa == 0 || daz)) return sign;
  // value = significand * 2^(e - 23); the fp16 result is a multiple of 2^quantum.
  const std::uint64_t significand = exponent ? mantissa | 0x800000u : mantissa;
  const int e = exponent ? static_cast<int>(exponent) - 127 : -126;
  if (e > 15) return half_overflow(sign, rounding);
  const int quantum = e >= -14 ? e - 10 : -24;
  const int shift = quantum - (e - 23);  // >= 13
  std::uint64_t kept = 0, remainder = significand, halfway = ~std::uint64_t{0};
  if (shift < 40) {
    kept = significand >> shift;
    remainder = significand & ((std::uint64_t{1} << shift) - 1);
    halfway = std::uint64_t{1} << (shift - 1);
  }
  bool up = false;
  switch (rounding) {
    case kRoundNearest:
      up = remainder > halfway || (remainder == halfway && (kept & 1));
      break;
    case kRoundDown:
      up = sign && remainder;
      break;
    case kRoundUp:
      up = !sign && remainder;
      break;
    default:
      break;
  }
  kept += up;
  // Normal results: kept in [1024, 2048], a carry into 2048 bumps the exponent.
  const std::uint64_t magnitude = e >= -14 ? ((e + 15) << 10) + (kept - 1024) : kept;
  if (magnitude >= 0x7C00) return half_overflow(sign, rounding);
  return sign | static_cast<std::uint16_t>(magnitude);
}

Status half_to_float_op(Operation& op) {
  return convert<std::uint16_t, float>(op, half_to_float);
}

// vcvtps2ph: imm8[2] = use MXCSR.RC, else imm8[1:0].
Status float_to_half_op(Operation& op) {
  const std::uint8_t imm = op.immediate();
  const unsigned rounding = (imm & 4) ? op.rounding_control() : (imm & 3u);
  const bool daz = daz_enabled(op);
  return convert<float, std::uint16_t>(
      op, [rounding, daz](float x) { return float_to_half(x, rounding, daz); });
}

// fp32 -> bf16, round to nearest even, denormals to zero, NaN quieted; MXCSR is neither
// consulted nor updated.
std::uint16_t float_to_bf16(float value) {
  const std::uint32_t f = bits_of(value);
  if (is_nan(value)) return static_cast<std::uint16_t>((f >> 16) | 0x40);
  if ((f & FloatTraits<float>::kExponent) == 0)
    return static_cast<std::uint16_t>((f >> 16) & 0x8000);
  const std::uint32_t rounding_bias = 0x7FFF + ((f >> 16) & 1);
  return static_cast<std::uint16_t>((f + rounding_bias) >> 16);
}

float bf16_to_float(std::uint16_t b) {
  return from_bits<float>(std::uint32_t{b} << 16);
}

Status float_to_bf16_op(Operation& op) {
  op.suppress_float_flags();
  return convert<float, std::uint16_t>(op, float_to_bf16);
}

// vcvtne2ps2bf16: the low half of the destination from src2, the high half from src1.
Status two_floats_to_bf16(Operation& op) {
  op.suppress_float_flags();
  const Vec a = op.source(1), b = op.source(2);
  const unsigned n = op.vector_bytes() / 4;
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i) {
    r.set<std::uint16_t>(i, float_to_bf16(b.get<float>(i)));
    r.set<std::uint16_t>(i + n, float_to_bf16(a.get<float>(i)));
  }
  op.write_destination(r);
  return Status::kDone;
}

// vdpbf16ps: acc += a.odd * b.odd, then acc += a.even * b.even, each a float FMA with
// denormal inputs as zero, denormal results flushed, round to nearest even.
Status dot_bf16(Operation& op) {
  op.suppress_float_flags();
  set_host_mxcsr(kMxcsrMasks | kMxcsrDaz | kMxcsrFtz);
  auto flush = [](float x) { return denormal_as_zero(x, true); };
  const Vec acc = op.source(0), a = op.source(1), b = op.source_masked(2);
  Vec r = zero_vector();
  for (unsigned i = 0; i < op.vector_bytes() / 4; ++i) {
    float sum = flush(acc.get<float>(i));
    for (int half = 1; half >= 0; --half) {
      const float x = flush(bf16_to_float(a.get<std::uint16_t>(2 * i + half)));
      const float y = flush(bf16_to_float(b.get<std::uint16_t>(2 * i + half)));
      sum = flush(std::fma(x, y, sum));
    }
    r.set<float>(i, sum);
  }
  op.write_destination(r);
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VCVTDQ2PS, int_to_float},
    {ZYDIS_MNEMONIC_VCVTPS2DQ, float_to_int<false>},
    {ZYDIS_MNEMONIC_VCVTTPS2DQ, float_to_int<true>},
    {ZYDIS_MNEMONIC_VCVTPH2PS, half_to_float_op},
    {ZYDIS_MNEMONIC_VCVTPS2PH, float_to_half_op},
    {ZYDIS_MNEMONIC_VCVTNEPS2BF16, float_to_bf16_op},
    {ZYDIS_MNEMONIC_VCVTNE2PS2BF16, two_floats_to_bf16},
    {ZYDIS_MNEMONIC_VDPBF16PS, dot_bf16},
};

}  // namespace

std::span<const OpEntry> convert_ops() {
  return kOps;
}

}  // namespace qforge::emulate
