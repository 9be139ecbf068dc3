// CodeCache: one generated kernel per GemmKey, shared by all threads.
//
// Lookups take a shared lock only; a miss inserts a future under a short exclusive lock
// and generates *outside* it, so no thread ever waits on code generation while holding a
// lock the hot path takes. warmup() generates every kernel a model needs at load time.
#pragma once

#include <cstddef>
#include <future>
#include <memory>
#include <shared_mutex>
#include <span>
#include <unordered_map>

#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/gemm_key.h"

namespace qforge {

// The generator that serves key.isa: AmxGenerator (tiles; it derives from GemmGenerator,
// whose store phase it reuses) for amx, GemmGenerator for the vector ISAs.
std::shared_ptr<const GemmGenerator> generate_kernel(const GemmKey& key);

struct CompiledKernel {
  std::shared_ptr<const GemmGenerator> code;  // kernel(), marks() and the code for dumps
  double generation_us = 0;
  GemmKernelFn fn() const { return code->kernel(); }
};

class CodeCache {
 public:
  // Returns the kernel for `key`, generating it on first use (throws what the generator
  // throws, e.g. qforge::Error for a key it cannot serve).
  CompiledKernel get(const GemmKey& key);
  // Generates all keys; returns the total generation time in microseconds.
  double warmup(std::span<const GemmKey> keys);
  std::size_t size() const;

  static CodeCache& global();

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<GemmKey, std::shared_future<CompiledKernel>, GemmKeyHash> kernels_;
};

}  // namespace qforge
