#include "model/format/ggml_kquants.h"

#include <cstdint>
#include <cstring>

#include "jit/base/error.h"
#include "jit/base/half_float.h"
#include "model/format/block_fields.h"

namespace qforge {
namespace {

// Q5_0 / Q5_1: value i's fifth bit is bit i of qh.
void dequantize_q5(const std::byte* block, bool with_min, float* out) {
  const float d = block_f16(block);
  const float m = with_min ? block_f16(block + 2) : 0.f;
  const std::byte* p = block + (with_min ? 4 : 2);
  std::uint32_t qh;
  std::memcpy(&qh, p, 4);
  const std::byte* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (block_u8(qs, j) & 15) | ((qh >> j & 1) << 4);
    const int hi = (block_u8(qs, j) >> 4) | ((qh >> (j + 16) & 1) << 4);
    if (with_min) {
      out[j] = static_cast<float>(lo) * d + m;
      out[j + 16] = static_cast<float>(hi) * d + m;
    } else {
      out[j] = static_cast<float>(lo - 16) * d;
      out[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

// Q4_K / Q5_K's 12 scale bytes: sub-block j's 6-bit scale and min.
//   j < 4:  sc = s[j] & 63,                          m = s[j + 4] & 63
//   j >= 4: sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4,  m = (s[j + 4] >> 4) | (s[j] >> 6) << 4
void scale_min_k4(int j, const std::byte* s, int& sc, int& m) {
  if (j < 4) {
    sc = block_u8(s, j) & 63;
    m = block_u8(s, j + 4) & 63;
  } else {
    sc = (block_u8(s, j + 4) & 15) | (block_u8(s, j - 4) >> 6) << 4;
    m = (block_u8(s, j + 4) >> 4) | (block_u8(s, j) >> 6) << 4;
  }
}

// Q4_K / Q5_K: 64 values at a time from 32 bytes of qs, the low nibbles first (sub-block
// 2i), then the high ones (2i + 1); Q5_K's fifth bits are qh[l] bits 2i and 2i + 1.
void dequantize_q45_k(const std::byte* block, bool five_bits, float* out) {
  const float d = block_f16(block), dmin = block_f16(block + 2);
  const std::byte* scales = block + 4;
  const std::byte* qh = block + 16;
  const std::byte* qs = block + (five_bits ? 48 : 16);
  for (int i = 0; i < 4; ++i) {
    int sc0, m0, sc1, m1;
    scale_min_k4(2 * i, scales, sc0, m0);
    scale_min_k4(2 * i + 1, scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t q = block_u8(qs, 32 * i + l);
      int lo = q & 15, hi = q >> 4;
      if (five_bits) {
        lo |= (block_u8(qh, l) >> (2 * i) & 1) << 4;
        hi |= (block_u8(qh, l) >> (2 * i + 1) & 1) << 4;
      }
      out[64 * i + l] = d0 * static_cast<float>(lo) - min0;
      out[64 * i + 32 + l] = d1 * static_cast<float>(hi) - min1;
    }
  }
}

// Q6_K, per half of 128 values (ql 64 bytes, qh 32 bytes, 8 scales):
//   value l       = ql[l] & 15      | (qh[l] >> 0 & 3) << 4     l in 0..31
//   value l + 32  = ql[l + 32] & 15 | (qh[l] >> 2 & 3) << 4
//   value l + 64  = ql[l] >> 4      | (qh[l] >> 4 & 3) << 4
//   value l + 96  = ql[l + 32] >> 4 | (qh[l] >> 6 & 3) << 4
// each minus 32, times d * scales[value / 16].
void dequantize_q6_k(const std::byte* block, float* out) {
  const std::byte* ql = block;
  const std::byte* qh = block + 128;
  const std::byte* sc = block + 192;
  const float d = block_f16(block + 208);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, out += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((block_u8(ql, l) & 15) | (block_u8(qh, l) & 3) << 4) - 32;
      const int q2 = ((block_u8(ql, l + 32) & 15) | (block_u8(qh, l) >> 2 & 3) << 4) - 32;
      const int q3 = ((block_u8(ql, l) >> 4) | (block_u8(qh, l) >> 4 & 3) << 4) - 32;
      const int q4 = ((block_u8(ql, l + 32) >> 4) | (block_u8(qh, l) >> 6 & 3) << 4) - 32;
      const auto scale = [&](int i) {
        return d * static_cast<float>(static_cast<std::int8_t>(block_u8(sc, i)));
      };
      out[l] = scale(is) * static_cast<float>(q1);
      out[l + 32] = scale(is + 2) * static_cast<float>(q2);
      out[l + 64] = scale(is + 4) * static_cast<float>(q3);
      out[l + 96] = scale(is + 6) * static_cast<float>(q4);
    }
  }
}

// Q2_K / Q3_K, per half of 128 values (32 bytes of qs): four 2-bit planes (shift 0, 2,
// 4, 6), each plane two sub-blocks of 16 (qs[0..15], qs[16..31]); sub-blocks in order.
// Q3_K's third bit of value v (of 256) is hmask[v % 32] bit v / 32: clear means minus 4.
void dequantize_q2_k(const std::byte* block, float* out) {
  const std::byte* scales = block;
  const std::byte* qs = block + 16;
  const float d = block_f16(block + 80), dmin = block_f16(block + 82);
  int is = 0;
  for (int half = 0; half < 2; ++half, qs += 32)
    for (int shift = 0; shift < 8; shift += 2)
      for (int part = 0; part < 2; ++part, ++is) {
        const std::uint8_t s = block_u8(scales, is);
        const float dl = d * static_cast<float>(s & 15), ml = dmin * static_cast<float>(s >> 4);
        for (int l = 0; l < 16; ++l)
          *out++ = dl * static_cast<float>(block_u8(qs, 16 * part + l) >> shift & 3) - ml;
      }
}

// Q3_K's 16 scales of 6 bits from 12 bytes: the low 4 bits are the nibbles of bytes
// 0..7 (scales 0..7 low nibbles, 8..15 high nibbles), the top 2 bits come from bytes 8..11
// (scale i: byte 8 + i % 4, bits 2 * (i / 4)).
void q3_k_scales(const std::byte* s, int out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? block_u8(s, i) & 15 : block_u8(s, i - 8) >> 4;
    const int high = block_u8(s, 8 + i % 4) >> (2 * (i / 4)) & 3;
    out[i] = (low | high << 4) - 32;
  }
}

void dequantize_q3_k(const std::byte* block, float* out) {
  const std::byte* hmask = block;
  const std::byte* qs = block + 32;
  int scales[16];
  q3_k_scales(block + 96, scales);
  const float d = block_f16(block + 108);
  int is = 0, plane = 0;
  for (int half = 0; half < 2; ++half, qs += 32)
    for (int shift = 0; shift < 8; shift += 2, ++plane)
      for (int part = 0; part < 2; ++part, ++is) {
        const float dl = d * static_cast<float>(scales[is]);
        for (int l = 0; l < 16; ++l) {
          const int low = block_u8(qs, 16 * part + l) >> shift & 3;
          const bool high = (block_u8(hmask, 16 * part + l) >> plane & 1) != 0;
          *out++ = dl * static_cast<float>(low - (high ? 0 : 4));
        }
      }
}

}  // namespace

bool is_extra_block_type(GgmlType type) {
  switch (type) {
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

void dequantize_extra_block(GgmlType type, const std::byte* block, float* out) {
  switch (type) {
    case GgmlType::Q5_0:
      return dequantize_q5(block, false, out);
    case GgmlType::Q5_1:
      return dequantize_q5(block, true, out);
    case GgmlType::Q2_K:
      return dequantize_q2_k(block, out);
    case GgmlType::Q3_K:
      return dequantize_q3_k(block, out);
    case GgmlType::Q4_K:
      return dequantize_q45_k(block, false, out);
    case GgmlType::Q5_K:
      return dequantize_q45_k(block, true, out);
    case GgmlType::Q6_K:
      return dequantize_q6_k(block, out);
    default:
      fail("dequantize: type ", ggml_type_name(type), " is not a K-quant / Q5 type");
  }
}

}  // namespace qforge
