#include "ops/quant/group_rows.h"

#include <emmintrin.h>

#include <cstring>
#include <vector>

#include "ops/quant/packed_layout.h"

namespace qforge {
namespace {

inline __m128i load16(const std::uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void store16(std::uint8_t* p, __m128i v) {
  _mm_store_si128(reinterpret_cast<__m128i*>(p), v);
}

// The word of column `column` in row r (see the header).
std::uint32_t row_word(const std::uint8_t* column, std::int64_t r, int bits) {
  std::uint32_t word;
  if (bits == 8) {
    std::memcpy(&word, column + 4 * r, 4);
  } else {
    std::uint64_t eight;  // operands are 0..15: the shift never carries across bytes
    std::memcpy(&eight, column + 8 * r, 8);
    word = static_cast<std::uint32_t>(eight) | static_cast<std::uint32_t>(eight >> 32) << 4;
  }
  return word;
}

void write_rows_scalar(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g, int bits,
                       std::int64_t row_begin, std::int64_t row_end) {
  for (std::int64_t r = row_begin; r < row_end; ++r)
    for (int c = 0; c < kPanelWidth; ++c) {
      const std::uint32_t word = row_word(operands + c * g, r, bits);
      std::memcpy(dst + r * kRowBytes + c * 4, &word, 4);
    }
}

// int8: four rows at a time. Columns 4q..4q+3 give one 16-byte load each (rows r..r+3
// of that column); a 4 x 4 word transpose turns them into 16 bytes of each of the four
// rows.
std::int64_t write_rows_int8(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g,
                             std::int64_t rows) {
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    std::uint8_t* out = dst + r * kRowBytes;
    for (int q = 0; q < 4; ++q) {
      const std::uint8_t* column = operands + 4 * q * g + 4 * r;
      const __m128i a0 = load16(column), a1 = load16(column + g);
      const __m128i a2 = load16(column + 2 * g), a3 = load16(column + 3 * g);
      const __m128i t0 = _mm_unpacklo_epi32(a0, a1), t1 = _mm_unpacklo_epi32(a2, a3);
      const __m128i t2 = _mm_unpackhi_epi32(a0, a1), t3 = _mm_unpackhi_epi32(a2, a3);
      store16(out + 16 * q, _mm_unpacklo_epi64(t0, t1));
      store16(out + kRowBytes + 16 * q, _mm_unpackhi_epi64(t0, t1));
      store16(out + 2 * kRowBytes + 16 * q, _mm_unpacklo_epi64(t2, t3));
      store16(out + 3 * kRowBytes + 16 * q, _mm_unpackhi_epi64(t2, t3));
    }
  }
  return r;
}

// int4: two rows at a time. A 16-byte load of a column holds rows r and r+1 as two
// 8-byte halves; OR-ing each half's upper 4 bytes, shifted up a nibble, into its lower
// 4 makes the two words, which a 4 x 2 transpose spreads over the two rows.
std::int64_t write_rows_int4(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g,
                             std::int64_t rows) {
  std::int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    std::uint8_t* out = dst + r * kRowBytes;
    for (int q = 0; q < 4; ++q) {
      __m128i words[4];  // [row r, row r+1, -, -] of column 4q + i
      for (int i = 0; i < 4; ++i) {
        const __m128i x = load16(operands + (4 * q + i) * g + 8 * r);
        const __m128i y = _mm_or_si128(x, _mm_slli_epi32(_mm_srli_epi64(x, 32), 4));
        words[i] = _mm_shuffle_epi32(y, _MM_SHUFFLE(3, 3, 2, 0));
      }
      const __m128i u0 = _mm_unpacklo_epi32(words[0], words[1]);
      const __m128i u1 = _mm_unpacklo_epi32(words[2], words[3]);
      store16(out + 16 * q, _mm_unpacklo_epi64(u0, u1));
      store16(out + kRowBytes + 16 * q, _mm_unpackhi_epi64(u0, u1));
    }
  }
  return r;
}

// int5, per 32-k chunk: the int4 rows of the operands' low 4 bits, then the row of their
// fifth bits (packed_layout.h): qword 2r + h, bit b = bit 4 of operand (column b / 4,
// k = 8r + 4h + b % 4 of the chunk).
void write_fifth_bit_row(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g,
                         std::int64_t chunk) {
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < 2; ++h) {
      std::uint64_t mask = 0;
      for (int b = 0; b < 64; ++b) {
        const std::uint8_t operand =
            operands[(b / 4) * g + kBitPlaneK * chunk + 8 * r + 4 * h + b % 4];
        mask |= static_cast<std::uint64_t>(operand >> 4 & 1) << b;
      }
      std::memcpy(dst + 8 * (2 * r + h), &mask, 8);
    }
}

void write_rows_int5(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g, bool fast) {
  thread_local std::vector<std::uint8_t> low;  // a group's low nibbles, reused per group
  low.resize(static_cast<std::size_t>(kPanelWidth * g));
  for (std::size_t i = 0; i < low.size(); ++i) low[i] = operands[i] & 0xf;
  const int chunk_bytes = kBitPlaneK * panel_bytes_per_k(5);
  for (std::int64_t chunk = 0; chunk < g / kBitPlaneK; ++chunk) {
    std::uint8_t* out = dst + chunk * chunk_bytes;
    const std::uint8_t* chunk_low = low.data() + kBitPlaneK * chunk;
    const std::int64_t done = fast ? write_rows_int4(out, chunk_low, g, 4) : 0;
    write_rows_scalar(out, chunk_low, g, 4, done, 4);
    write_fifth_bit_row(out + 4 * kRowBytes, operands, g, chunk);
  }
}

}  // namespace

void write_group_rows(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g, int bits) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst) % 16 == 0;
  if (bits == 5) return write_rows_int5(dst, operands, g, aligned);
  const std::int64_t rows = g / (bits == 8 ? 4 : 8);
  std::int64_t done = 0;
  if (aligned)
    done = bits == 8 ? write_rows_int8(dst, operands, g, rows)
                     : write_rows_int4(dst, operands, g, rows);
  write_rows_scalar(dst, operands, g, bits, done, rows);
}

void write_group_rows_reference(std::uint8_t* dst, const std::uint8_t* operands, std::int64_t g,
                                int bits) {
  if (bits == 5) return write_rows_int5(dst, operands, g, /*fast=*/false);
  write_rows_scalar(dst, operands, g, bits, 0, g / (bits == 8 ? 4 : 8));
}

}  // namespace qforge
