// A 64-byte aligned, zero-initialised heap buffer (one cache line, one zmm, one AMX row).
//
// Buffers of 2 MiB and more (packed weights, the KV cache, benchmark weight copies) start
// on a 2 MiB boundary and ask the kernel for transparent huge pages: a decode step streams
// the whole model, and with 4 KiB pages every 4 KiB is a TLB miss and, on first touch, a
// page fault (measured on a KVM guest: 2.8 s per GiB of 4 KiB faults, 0.08 s with huge
// pages). Where THP is off the advice is ignored and nothing else changes.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace qforge {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kHugePage = std::size_t{2} << 20;

constexpr std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

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
    void* memory = allocate(bytes);
    std::memset(static_cast<char*>(memory) + count * sizeof(T), 0, bytes - count * sizeof(T));
    data_.reset(static_cast<T*>(memory));
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

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](std::size_t i) { return data_.get()[i]; }
  const T& operator[](std::size_t i) const { return data_.get()[i]; }

 private:
  static void* allocate(std::size_t bytes) {
    const std::size_t alignment = bytes >= kHugePage ? kHugePage : kCacheLine;
    void* memory = nullptr;
    if (posix_memalign(&memory, alignment, bytes) != 0) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (alignment == kHugePage) madvise(memory, round_up(bytes, 4096), MADV_HUGEPAGE);
#endif
    return memory;
  }

  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace qforge
