// Memory on a 2 MiB boundary, advised for transparent huge pages before its first touch:
// a fresh mapping (never memory malloc recycles with its 4 KiB pages present), or, under
// ASan, heap memory (ASan checks the heap, not mappings). AlignedBuffer's large buffers and
// HugePageArena both take theirs here.
//
//   mmap(length + 2 MiB) -> [unmapped head | memory, 2 MiB aligned, length | unmapped tail]
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace qforge {

inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

constexpr std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// `length` bytes (a multiple of 4 KiB); release_huge_page_aligned frees them.
inline void* acquire_huge_page_aligned(std::size_t length) {
  if (kAddressSanitizer) {
    void* memory = nullptr;
    if (posix_memalign(&memory, kHugePage, length) != 0) throw std::bad_alloc();
    return memory;
  }
  void* region =
      mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) throw std::bad_alloc();
  char* const start = static_cast<char*>(region);
  char* const aligned =
      reinterpret_cast<char*>(round_up(reinterpret_cast<std::uintptr_t>(start), kHugePage));
  if (aligned > start) munmap(start, static_cast<std::size_t>(aligned - start));
  char* const end = start + length + kHugePage;
  if (end > aligned + length)
    munmap(aligned + length, static_cast<std::size_t>(end - aligned - length));
#ifdef MADV_HUGEPAGE
  madvise(aligned, length, MADV_HUGEPAGE);
#endif
  return aligned;
}

inline void release_huge_page_aligned(void* memory, std::size_t length) {
  if (kAddressSanitizer)
    std::free(memory);
  else
    munmap(memory, length);
}

}  // namespace qforge
