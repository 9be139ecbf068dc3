// One mapping on transparent huge pages that many buffers share, handed out front to back.
//
// Each buffer of 2 MiB and more is its own 2 MiB-aligned mapping (aligned_buffer.h), so
// its last partial 2 MiB stays on 4 KiB pages: in a TinyLlama Q4_0 model 29% of each qkv
// layer's bytes, 11% of wo's, 3% of gate/up's and down's. On a Zen 4 KVM guest in its fast
// bandwidth state the layers read 11-20% slower for it (docs/PERFORMANCE.md). A model's
// packed layers moved into one arena, in the order a decode step reads them, leave one
// partial huge page in all:
//
//   arena:  [ blk.0 qkv | blk.0 wo | blk.0 gate/up | blk.0 down | blk.1 qkv | ... | output ]
//            each piece 64-byte aligned; the mapping 2 MiB aligned and a whole number of
//            2 MiB pages (so at most 2 MiB - 64 bytes of it unused)
//
// The arena is freed when the last buffer in it is (AlignedBuffer holds a shared_ptr).
// Under ASan the memory comes from the heap, as AlignedBuffer's does.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "jit/base/error.h"

namespace qforge {

namespace arena_detail {
inline constexpr std::size_t kPiece = 64;                   // alignment of each piece
inline constexpr std::size_t kHuge = std::size_t{2} << 20;  // one huge page
constexpr std::size_t up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAsan = true;
#else
inline constexpr bool kAsan = false;
#endif
#else
inline constexpr bool kAsan = false;
#endif
}  // namespace arena_detail

class HugePageArena {
 public:
  // Room for `bytes` (the sum of the pieces to come, each rounded up to 64 bytes).
  explicit HugePageArena(std::size_t bytes) {
    using namespace arena_detail;
    capacity_ = up(bytes == 0 ? kPiece : bytes, kHuge);
    if (kAsan) {
      if (posix_memalign(reinterpret_cast<void**>(&base_), kHuge, capacity_) != 0)
        throw std::bad_alloc();
      return;
    }
    void* region = mmap(nullptr, capacity_ + kHuge, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) throw std::bad_alloc();
    char* const start = static_cast<char*>(region);
    base_ = reinterpret_cast<char*>(up(reinterpret_cast<std::uintptr_t>(start), kHuge));
    if (base_ > start) munmap(start, static_cast<std::size_t>(base_ - start));
    char* const end = start + capacity_ + kHuge;
    if (end > base_ + capacity_)
      munmap(base_ + capacity_, static_cast<std::size_t>(end - base_ - capacity_));
#ifdef MADV_HUGEPAGE
    madvise(base_, capacity_, MADV_HUGEPAGE);
#endif
  }
  ~HugePageArena() {
    if (arena_detail::kAsan)
      std::free(base_);
    else
      munmap(base_, capacity_);
  }
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // The next `bytes` (rounded up to 64), 64-byte aligned; throws when they do not fit.
  void* take(std::size_t bytes) {
    const std::size_t piece = arena_detail::up(bytes == 0 ? 1 : bytes, arena_detail::kPiece);
    QF_REQUIRE(piece <= capacity_ - used_, "huge-page arena: ", piece, " bytes asked, ",
               capacity_ - used_, " of ", capacity_, " left");
    char* const out = base_ + used_;
    used_ += piece;
    return out;
  }
  const char* base() const {
    return base_;
  }
  std::size_t capacity() const {
    return capacity_;
  }  // a whole number of 2 MiB pages
  std::size_t used() const {
    return used_;
  }

  // The bytes take(bytes) uses.
  static std::size_t piece_bytes(std::size_t bytes) {
    return arena_detail::up(bytes == 0 ? 1 : bytes, arena_detail::kPiece);
  }

 private:
  char* base_ = nullptr;
  std::size_t capacity_ = 0, used_ = 0;
};

}  // namespace qforge
