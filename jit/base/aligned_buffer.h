// A 64-byte aligned, zero-initialised heap buffer (one cache line, one zmm, one AMX row).
//
// Buffers of 2 MiB and more (packed weights, the KV cache, benchmark weight copies) start
// on a 2 MiB boundary and ask the kernel for transparent huge pages: a decode step streams
// the whole model, and with 4 KiB pages every 4 KiB is a TLB miss and, on first touch, a
// page fault (measured on a KVM guest: 2.8 s per GiB of 4 KiB faults, 0.08 s with huge
// pages). Where THP is off the advice is ignored and nothing else changes.
//
// Those buffers are mapped afresh (mmap), not taken from malloc: malloc hands back memory
// that an earlier buffer freed with its 4 KiB pages already present, and advice given then
// does not replace them (bench_gemm, which builds its weight copies again on each run, kept
// 266 MB of them on huge pages on the first run and 16 MB by the fourth; its GEMVs read at
// 0.72-0.95 of a plain read of the same bytes, 0.91-1.00 on fresh mappings). Their last
// partial 2 MiB stays on 4 KiB pages, as with malloc. Under ASan they come from the heap.
//
//   mmap(length + 2 MiB) -> [unmapped head | buffer, 2 MiB aligned, length | unmapped tail]
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <utility>

#include "jit/base/huge_page_arena.h"
#include "jit/base/huge_page_mapping.h"

namespace qforge {

inline constexpr std::size_t kCacheLine = 64;
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t count) { resize(count); }

  // Replaces the contents with `count` zeroed elements.
  void resize(std::size_t count) {
    resize_for_overwrite(count);
    std::memset(data_.get(), 0, round_up(count * sizeof(T) + (count == 0), kCacheLine));
  }
  // The same without zeroing the elements, for a caller that writes every one of them
  // (the padding up to the cache line is zeroed).
  void resize_for_overwrite(std::size_t count) {
    const std::size_t bytes = round_up(count * sizeof(T) + (count == 0), kCacheLine);
    std::size_t mapped = 0;
    void* memory = allocate(bytes, mapped);
    std::memset(static_cast<char*>(memory) + count * sizeof(T), 0, bytes - count * sizeof(T));
    data_ = std::unique_ptr<T, Free>(static_cast<T*>(memory), Free{mapped, nullptr});
    size_ = count;
    capacity_ = count;
  }
  // `count` elements without zeroing them, in the memory already held when it is large
  // enough (elements past the old size keep whatever they held). A buffer that goes back
  // and forth between a prefill chunk's rows and one decode row is allocated once, not
  // freed and mapped again, page faults and all, on every switch.
  void fit_for_overwrite(std::size_t count) {
    if (count > capacity_ || !data_) {
      resize_for_overwrite(count);
      return;
    }
    size_ = count;
  }

  // Moves the contents (and the zeroed padding after them) into the next piece of `arena`,
  // which this buffer then keeps alive, and frees the memory it held (huge_page_arena.h).
  void move_into(const std::shared_ptr<HugePageArena>& arena) {
    const std::size_t bytes = held_bytes();
    T* const memory = static_cast<T*>(arena->take(bytes));
    if (data_) std::memcpy(memory, data_.get(), bytes);
    data_ = std::unique_ptr<T, Free>(memory, Free{0, arena});
  }

  // The bytes the buffer holds: its capacity and the zeroed padding to the cache line.
  std::size_t held_bytes() const {
    return round_up(capacity_ * sizeof(T) + (capacity_ == 0), kCacheLine);
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }

 private:
  // `mapped`: the length of the huge-page memory, or 0 for memory from posix_memalign.
  static void* allocate(std::size_t bytes, std::size_t& mapped) {
    if (bytes < kHugePage) {
      void* memory = nullptr;
      if (posix_memalign(&memory, kCacheLine, bytes) != 0) throw std::bad_alloc();
      return memory;
    }
    mapped = round_up(bytes, 4096);
    return acquire_huge_page_aligned(mapped);
  }

  // A mapping of `mapped` bytes, memory from posix_memalign, or a piece of `arena`, which
  // the deleter keeps alive (and frees with the last buffer in it).
  struct Free {
    std::size_t mapped = 0;
    std::shared_ptr<HugePageArena> arena;
    void operator()(T* p) const {
      if (arena) return;
      if (mapped)
        release_huge_page_aligned(p, mapped);
      else
        std::free(p);
    }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace qforge
