// AlignedBuffer: alignment and zeroing at every size, and buffers of 2 MiB and more on huge
// pages.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "jit/base/aligned_buffer.h"

namespace qforge {
namespace {

TEST(AlignedBuffer, IsAlignedAndZeroedAtEverySize) {
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000}, kHugePage - 1,
                            kHugePage, 3 * kHugePage + 100}) {
    AlignedBuffer<std::uint8_t> b(count);
    const auto address = reinterpret_cast<std::uintptr_t>(b.data());
    EXPECT_EQ(address % (count >= kHugePage ? kHugePage : kCacheLine), 0u) << count;
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(b[i], 0) << count << " at " << i;
    if (count > 0) b[count - 1] = 7;  // writable to the last byte
    b.resize(count / 2);              // a second allocation frees the first
    for (std::size_t i = 0; i < count / 2; ++i) ASSERT_EQ(b[i], 0);
  }
}

// The kernel's AnonHugePages of the mapping holding `p` (kB), from /proc/self/smaps.
long huge_kb_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(14));
    }
  }
  return -1;
}

std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(f, all);
  const auto open = all.find('['), close = all.find(']');
  return open == std::string::npos ? "" : all.substr(open + 1, close - open - 1);
}

// Wherever the suite has left the heap: a fresh mapping, advised before its first touch.
TEST(AlignedBuffer, LargeBuffersAreOnHugePages) {
  if (kAddressSanitizer) GTEST_SKIP() << "under ASan large buffers come from the heap";
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise")
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' here";
  for (int round = 0; round < 3; ++round) {  // freed and mapped again
    AlignedBuffer<std::uint8_t> b(8 << 20);  // zeroed: every page touched
    const long huge = huge_kb_at(b.data());
    ASSERT_GE(huge, 0) << "no mapping holds the buffer";
    EXPECT_GE(huge, 4 << 10) << "at least 2 of its 4 huge pages, round " << round;
  }
}

}  // namespace
}  // namespace qforge
