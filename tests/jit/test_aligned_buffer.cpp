// AlignedBuffer: alignment and zeroing at every size, buffers of 2 MiB and more on huge
// pages, and buffers moved into one HugePageArena.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "jit/base/aligned_buffer.h"
#include "jit/base/error.h"

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

// Buffers moved into an arena keep their contents and padding, lie in it front to back,
// 64-byte aligned, and keep it alive after the last other reference is gone; the arena
// refuses a piece that does not fit.
TEST(HugePageArena, BuffersMovedInKeepTheirBytesInOrder) {
  const std::size_t counts[] = {1, 1000, kHugePage + 3, 0, 3 * kHugePage - 70, 64};
  std::vector<AlignedBuffer<std::uint8_t>> buffers;
  std::vector<std::vector<std::uint8_t>> expected;
  std::mt19937 rng(11);
  std::size_t total = 0;
  for (std::size_t count : counts) {
    buffers.emplace_back(count);
    std::vector<std::uint8_t> bytes(count);
    for (auto& v : bytes) v = static_cast<std::uint8_t>(rng());
    if (count > 0) std::memcpy(buffers.back().data(), bytes.data(), count);
    expected.push_back(std::move(bytes));
    total += HugePageArena::piece_bytes(buffers.back().held_bytes());
  }
  auto arena = std::make_shared<HugePageArena>(total);
  EXPECT_EQ(arena->capacity() % kHugePage, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(arena->base()) % kHugePage, 0u);
  const char* next = arena->base();
  for (auto& b : buffers) {
    b.move_into(arena);
    EXPECT_EQ(reinterpret_cast<const char*>(b.data()), next);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kCacheLine, 0u);
    next += b.held_bytes();
  }
  EXPECT_EQ(arena->used(), total);
  EXPECT_THROW((void)arena->take(arena->capacity() - total + 1), Error);
  const HugePageArena* raw = arena.get();
  arena.reset();  // the buffers hold it now
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (counts[i] > 0) {
      ASSERT_EQ(std::memcmp(buffers[i].data(), expected[i].data(), counts[i]), 0) << i;
    }
    for (std::size_t j = counts[i]; j < buffers[i].held_bytes(); ++j)
      ASSERT_EQ(buffers[i].data()[j], 0) << "padding of buffer " << i;
  }
  EXPECT_EQ(reinterpret_cast<const char*>(buffers.front().data()), raw->base());
  buffers.front().resize(10);  // leaves the arena for memory of its own
  EXPECT_NE(reinterpret_cast<const char*>(buffers.front().data()), raw->base());
}

// The arena's pages are huge pages, tails of each piece included.
TEST(HugePageArena, IsOnHugePages) {
  if (kAddressSanitizer) GTEST_SKIP() << "under ASan the arena comes from the heap";
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise")
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' here";
  auto arena = std::make_shared<HugePageArena>(3 * (kHugePage + 4096));
  for (int i = 0; i < 3; ++i) {
    AlignedBuffer<std::uint8_t> b(kHugePage + 4096 - 64);
    b.move_into(arena);
    std::memset(b.data(), 1, b.size());
  }
  const long huge = huge_kb_at(arena->base());
  ASSERT_GE(huge, 0) << "no mapping holds the arena";
  EXPECT_GE(huge, 4 << 10) << "at least 2 of its 4 huge pages";
}

}  // namespace
}  // namespace qforge
