#include "jit/core/code_cache.h"

#include <chrono>
#include <mutex>
#include <new>

#include "jit/core/perf_map.h"
#include "jit/gemm/amx_generator.h"

namespace qforge {

std::shared_ptr<const GemmGenerator> generate_kernel(const GemmKey& key) {
  try {
    if (key.isa == Isa::amx) return std::make_shared<const AmxGenerator>(key);
    return std::make_shared<const GemmGenerator>(key);
  } catch (const Xbyak::Error& e) {
    // No memory for the code buffer (an address-space limit): the caller's out-of-memory
    // path says what was being loaded.
    if (static_cast<int>(e) == Xbyak::ERR_CANT_ALLOC) throw std::bad_alloc();
    throw;
  }
}

CompiledKernel CodeCache::get(const GemmKey& key) {
  {
    std::shared_lock lock(mutex_);
    if (auto it = kernels_.find(key); it != kernels_.end()) {
      auto future = it->second;
      lock.unlock();
      return future.get();
    }
  }
  std::promise<CompiledKernel> promise;
  std::shared_future<CompiledKernel> future;
  {
    std::unique_lock lock(mutex_);
    auto [it, inserted] = kernels_.try_emplace(key, promise.get_future().share());
    future = it->second;
    if (!inserted) {
      lock.unlock();
      return future.get();
    }
  }
  try {  // generate outside the lock
    const auto start = std::chrono::steady_clock::now();
    auto code = generate_kernel(key);
    note_generated_code(code->getCode(), code->getSize(), kernel_name(key));
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    promise.set_value(CompiledKernel{std::move(code), us});
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::unique_lock lock(mutex_);
    kernels_.erase(key);  // a later call may try again (and fail the same way)
  }
  return future.get();
}

double CodeCache::warmup(std::span<const GemmKey> keys) {
  double total_us = 0;
  for (const GemmKey& key : keys) total_us += get(key).generation_us;
  return total_us;
}

std::size_t CodeCache::size() const {
  std::shared_lock lock(mutex_);
  return kernels_.size();
}

CodeCache& CodeCache::global() {
  static CodeCache cache;
  return cache;
}

}  // namespace qforge
