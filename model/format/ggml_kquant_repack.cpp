#include "model/format/ggml_kquant_repack.h"

#include <cmath>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/block_fields.h"
#include "ops/quant/pack.h"

namespace qforge {
namespace {

float finite(float value, const char* field, const char* what) {
  QF_REQUIRE(std::isfinite(value), what, ": ", field, " is ", value);
  return value;
}

// The stored values (q) of one super-block, its groups' integer scales and minima, and
// its f16 d and dmin, before they become operands and params.
struct BlockIntegers {
  int q[256];
  int scale[16];
  int min[16];
  float d = 0.f, dmin = 0.f;
};

// Q4_K: scales and minima of 6 bits in 12 bytes (ggml's get_scale_min_k4):
//   j < 4:  sc = s[j] & 63,                               m = s[j + 4] & 63
//   j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,  m = (s[j + 4] >> 4) | (s[j] >> 6) << 4
// values 64i + l (low nibbles of qs[32i + l]) are sub-block 2i, 64i + 32 + l (high) 2i + 1.
// Q5_K: qh[32] before qs; the fifth bit of value 64i + l is qh[l] bit 2i, of 64i + 32 + l
// bit 2i + 1.
void q45_k_integers(const std::byte* block, bool five_bits, BlockIntegers& b) {
  const std::byte* s = block + 4;
  const std::byte* qh = block + 16;
  const std::byte* qs = block + (five_bits ? 48 : 16);
  b.d = block_f16(block);
  b.dmin = block_f16(block + 2);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      b.scale[j] = block_u8(s, j) & 63;
      b.min[j] = block_u8(s, j + 4) & 63;
    } else {
      b.scale[j] = (block_u8(s, j + 4) & 15) | (block_u8(s, j - 4) >> 6) << 4;
      b.min[j] = (block_u8(s, j + 4) >> 4) | (block_u8(s, j) >> 6) << 4;
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) {
      b.q[64 * i + l] = block_u8(qs, 32 * i + l) & 15;
      b.q[64 * i + 32 + l] = block_u8(qs, 32 * i + l) >> 4;
      if (five_bits) {
        b.q[64 * i + l] |= (block_u8(qh, l) >> (2 * i) & 1) << 4;
        b.q[64 * i + 32 + l] |= (block_u8(qh, l) >> (2 * i + 1) & 1) << 4;
      }
    }
}

// Q2_K / Q3_K order their 16 sub-blocks of 16 as two halves of 32 qs bytes, four 2-bit
// planes (shift 0, 2, 4, 6) each, two parts (qs[0..15], qs[16..31]) each.
//   Q2_K: scales[16] (scale low 4 bits, min high 4), qs[64], d, dmin
//   Q3_K: hmask[32], qs[64], scales[12] (6 bits each, minus 32), d; the third bit of a
//         value in plane p is hmask[16 * part + l] bit p, clear meaning minus 4
void q2_q3_k_integers(const std::byte* block, bool q3, BlockIntegers& b) {
  const std::byte* qs = block + (q3 ? 32 : 16);
  if (q3) {
    const std::byte* s = block + 96;
    for (int i = 0; i < 16; ++i) {
      const int low = i < 8 ? block_u8(s, i) & 15 : block_u8(s, i - 8) >> 4;
      const int high = block_u8(s, 8 + i % 4) >> (2 * (i / 4)) & 3;
      b.scale[i] = (low | high << 4) - 32;
      b.min[i] = 0;
    }
    b.d = block_f16(block + 108);
  } else {
    for (int i = 0; i < 16; ++i) {
      b.scale[i] = block_u8(block, i) & 15;
      b.min[i] = block_u8(block, i) >> 4;
    }
    b.d = block_f16(block + 80);
    b.dmin = block_f16(block + 82);
  }
  int sub = 0, plane = 0;
  for (int half = 0; half < 2; ++half, qs += 32)
    for (int shift = 0; shift < 8; shift += 2, ++plane)
      for (int part = 0; part < 2; ++part, ++sub)
        for (int l = 0; l < 16; ++l) {
          const int low = block_u8(qs, 16 * part + l) >> shift & 3;
          const bool high = q3 && (block_u8(block, 16 * part + l) >> plane & 1) != 0;
          b.q[16 * sub + l] = q3 ? low - (high ? 0 : 4) : low;
        }
}

// Q6_K, per half of 128 values (ql 64 bytes, qh 32, scales 8):
//   value l      = ql[l] & 15      | (qh[l] >> 0 & 3) << 4     l in 0..31
//   value l + 32 = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4
//   value l + 64 = ql[l] >> 4      | (qh[l] >> 4 & 3) << 4
//   value l + 96 = ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4
// minus 32; sub-block (value / 16) has the s8 scale scales[value / 16].
void q6_k_integers(const std::byte* block, BlockIntegers& b) {
  const std::byte* ql = block;
  const std::byte* qh = block + 128;
  for (int i = 0; i < 16; ++i) {
    b.scale[i] = static_cast<std::int8_t>(block_u8(block, 192 + i));
    b.min[i] = 0;
  }
  b.d = block_f16(block + 208);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32) {
    int* q = b.q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      q[l] = ((block_u8(ql, l) & 15) | (block_u8(qh, l) & 3) << 4) - 32;
      q[l + 32] = ((block_u8(ql, l + 32) & 15) | (block_u8(qh, l) >> 2 & 3) << 4) - 32;
      q[l + 64] = ((block_u8(ql, l) >> 4) | (block_u8(qh, l) >> 4 & 3) << 4) - 32;
      q[l + 96] = ((block_u8(ql, l + 32) >> 4) | (block_u8(qh, l) >> 6 & 3) << 4) - 32;
    }
  }
}

}  // namespace

std::optional<QuantScheme> kquant_scheme(GgmlType type) {
  QuantScheme s;
  s.granularity = Granularity::per_group;
  s.superblock = 256;
  switch (type) {
    case GgmlType::Q4_K:
      s.bits = 4, s.group = 32, s.asymmetric = true;
      return s;
    case GgmlType::Q5_K:
      s.bits = 5, s.group = 32, s.asymmetric = true;
      return s;
    case GgmlType::Q2_K:
      s.bits = 4, s.group = 16, s.asymmetric = true;
      return s;
    case GgmlType::Q3_K:
      s.bits = 4, s.group = 16, s.asymmetric = false;
      return s;
    case GgmlType::Q6_K:
      s.bits = 8, s.group = 16, s.asymmetric = false;
      return s;
    default:
      return std::nullopt;
  }
}

void kquant_block_operands(GgmlType type, const std::byte* block, std::uint8_t* operands,
                           GroupParams* params, const char* what) {
  const std::optional<QuantScheme> scheme = kquant_scheme(type);
  QF_REQUIRE(scheme.has_value(), "repack: type ", ggml_type_name(type),
             " has no two-level qforge layout");
  BlockIntegers b;
  if (type == GgmlType::Q4_K || type == GgmlType::Q5_K)
    q45_k_integers(block, type == GgmlType::Q5_K, b);
  else if (type == GgmlType::Q6_K)
    q6_k_integers(block, b);
  else
    q2_q3_k_integers(block, type == GgmlType::Q3_K, b);
  const float d = finite(b.d, "d", what);
  const float dmin = scheme->asymmetric ? finite(b.dmin, "dmin", what) : 0.f;
  for (int i = 0; i < 256; ++i)
    operands[i] = static_cast<std::uint8_t>(operand_of(b.q[i], scheme->bits, scheme->asymmetric));
  for (int j = 0; j < 256 / scheme->group; ++j)
    params[j] = two_level_params(b.scale[j], d, scheme->asymmetric ? b.min[j] : 0, -dmin);
}

}  // namespace qforge
