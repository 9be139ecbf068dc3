// A 64-byte aligned, zero-initialised heap buffer (one cache line, one zmm, one AMX row).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace qforge {

inline constexpr std::size_t kCacheLine = 64;

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
    void* memory = std::aligned_alloc(kCacheLine, bytes);
    if (!memory) throw std::bad_alloc();
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
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace qforge
