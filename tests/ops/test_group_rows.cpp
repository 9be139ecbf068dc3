// The vector transpose that lays out a packed group's rows gives the bytes of the
// word-at-a-time definition, for every row-count tail and an unaligned destination.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "jit/base/aligned_buffer.h"
#include "ops/quant/group_rows.h"
#include "ops/quant/packed_layout.h"

namespace qforge {
namespace {

TEST(GroupRows, VectorTransposeMatchesTheDefinition) {
  std::mt19937 rng(31);
  for (const int bits : {8, 5, 4}) {
    const int k_per_row = bits == 8 ? 4 : bits == 5 ? 32 : 8;  // int5: a chunk of 5 rows
    for (const std::int64_t steps : {1, 2, 3, 4, 5, 7, 8, 9, 16, 25, 512}) {
      if (bits == 5 && steps > 16) continue;
      const std::int64_t g = steps * k_per_row;
      const std::int64_t rows = bits == 5 ? 5 * steps : steps;
      std::uniform_int_distribution<int> value(0, (1 << bits) - 1);
      std::vector<std::uint8_t> operands(static_cast<std::size_t>(kPanelWidth * g));
      for (auto& o : operands) o = static_cast<std::uint8_t>(value(rng));
      for (const int misalign : {0, 4}) {
        const std::size_t bytes = static_cast<std::size_t>(rows * kRowBytes) + misalign;
        AlignedBuffer<std::uint8_t> fast(bytes + 64), expected(bytes + 64);
        for (std::size_t i = 0; i < bytes + 64; ++i) fast[i] = expected[i] = 0xa5;  // poison
        write_group_rows(fast.data() + misalign, operands.data(), g, bits);
        write_group_rows_reference(expected.data() + misalign, operands.data(), g, bits);
        for (std::size_t i = 0; i < bytes + 64; ++i)
          ASSERT_EQ(fast[i], expected[i])
              << "bits " << bits << " rows " << rows << " misalign " << misalign << " byte " << i;
        // The definition itself: row 0, column 1 holds that column's first operands.
        const std::uint8_t* row0 = expected.data() + misalign;
        if (bits == 8) {
          EXPECT_EQ(row0[4], operands[static_cast<std::size_t>(g)]);
        } else if (bits == 5) {  // nibbles as int4; fifth bits: bit b of qword 0 = byte b
          EXPECT_EQ(row0[4], (operands[static_cast<std::size_t>(g)] & 15) |
                                 (operands[static_cast<std::size_t>(g + 4)] & 15) << 4);
          for (int b = 0; b < 64; ++b)
            EXPECT_EQ(row0[4 * kRowBytes + b / 8] >> (b % 8) & 1,
                      operands[static_cast<std::size_t>((b / 4) * g + b % 4)] >> 4)
                << "bit " << b;
          // qword 1: the high nibbles (k = 4 + i) of the first nibble row
          EXPECT_EQ(row0[4 * kRowBytes + 8] & 1, operands[4] >> 4);
        } else {
          EXPECT_EQ(row0[4], operands[static_cast<std::size_t>(g)] |
                                 operands[static_cast<std::size_t>(g + 4)] << 4);
        }
        EXPECT_EQ(expected[bytes], 0xa5);  // nothing past the rows
      }
    }
  }
}

}  // namespace
}  // namespace qforge
