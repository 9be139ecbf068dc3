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
// Its memory comes from huge_page_mapping.h, as AlignedBuffer's large buffers' does.
#pragma once

#include <cstddef>

#include "jit/base/error.h"
#include "jit/base/huge_page_mapping.h"

namespace qforge {

class HugePageArena {
 public:
  // Room for `bytes` (the sum of the pieces to come, each rounded up to 64 bytes).
  explicit HugePageArena(std::size_t bytes)
      : capacity_(round_up(bytes == 0 ? kPiece : bytes, kHugePage)),
        base_(static_cast<char*>(acquire_huge_page_aligned(capacity_))) {}
  ~HugePageArena() { release_huge_page_aligned(base_, capacity_); }
  HugePageArena(const HugePageArena&) = delete;
  HugePageArena& operator=(const HugePageArena&) = delete;

  // The next `bytes` (rounded up to 64), 64-byte aligned; throws when they do not fit.
  void* take(std::size_t bytes) {
    const std::size_t piece = piece_bytes(bytes);
    QF_REQUIRE(piece <= capacity_ - used_, "huge-page arena: ", piece, " bytes asked, ",
               capacity_ - used_, " of ", capacity_, " left");
    char* const out = base_ + used_;
    used_ += piece;
    return out;
  }
  const char* base() const { return base_; }
  // A whole number of 2 MiB pages.
  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }

  // The bytes take(bytes) uses.
  static std::size_t piece_bytes(std::size_t bytes) {
    return round_up(bytes == 0 ? 1 : bytes, kPiece);
  }

 private:
  static constexpr std::size_t kPiece = 64;  // the alignment of each piece
  std::size_t capacity_;
  char* base_;
  std::size_t used_ = 0;
};

}  // namespace qforge
