// The tuning database: for one CPU signature, the blocking measured best per kernel shape
// and thread count. On disk it is versioned JSON:
//
//   { "format": "qforge-tuning", "version": 1, "generator_version": 1,
//     "signature": "AuthenticAMD-25-1-1_avx2_c2_l2-512k",
//     "entries": [
//       { "isa": "avx2", "n": 2048, "k": 5632, "k_padded": 5632, "g": 128, "bits": 4,
//         "asymmetric": false, "epilogue": "deq-res-f32", "m_bucket": "m1", "threads": 2,
//         "blocking": { "mr": 1, "nr": 2, "k_unroll": 8, "prefetch_distance": 512 },
//         "default_us": 412.0, "tuned_us": 371.5,                        (informational)
//         "amx_min_m": 32, "gemm_min_m": 5, "thread_split": "units",     (optional)
//         "activation": "f32" }                     (optional: weight-only kernels; s8)
//     ] }
//
// Loading never throws: a file for another signature, format or generator version, or a
// corrupt or truncated one is rejected with a reason; an entry with invalid values (a
// blocking that does not fit the register budget, an unknown ISA...) is dropped with a
// warning and the rest is kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "jit/gemm/gemm_args.h"
#include "jit/gemm/gemm_key.h"

namespace qforge {

inline constexpr int kTuningFormatVersion = 1;
inline constexpr int kMaxGemmMinRows = 64;  // a larger GEMV/GEMM threshold is refused

// What one entry is keyed by: the kernel's key with its blocking cleared (ISA = kernel
// family, N, K, Kp, g, bits, symmetry, epilogue, M bucket, generator version) and the
// thread count the layer runs with.
struct TuningKey {
  GemmKey shape;  // shape.blocking == Blocking{0, 0, 0, 0}
  int threads = 1;

  bool operator==(const TuningKey& o) const { return shape == o.shape && threads == o.threads; }
};
TuningKey tuning_key_of(const GemmKey& key, int threads);

struct TuningKeyHash {
  std::size_t operator()(const TuningKey& key) const;
};

struct TunedKernel {
  Blocking blocking;
  std::optional<int> amx_min_m;             // M from which the AMX kernel beats the zmm kernel
  std::optional<int> gemm_min_m;            // M from which the GEMM kernel beats the GEMV kernel
                                            // (kept in the shape's M-bucket "ms" entry)
  std::optional<ThreadSplit> thread_split;  // for the entry's M bucket ("ml" entries)
  double default_us = 0;                    // as measured by the tuner (informational)
  double tuned_us = 0;
};

class TuningDb {
 public:
  explicit TuningDb(std::string signature);

  const std::string& signature() const { return signature_; }
  std::size_t size() const { return entries_.size(); }
  const std::unordered_map<TuningKey, TunedKernel, TuningKeyHash>& entries() const {
    return entries_;
  }
  // Adds or replaces an entry (throws qforge::Error if the blocking does not fit the key).
  void set(const TuningKey& key, const TunedKernel& tuned);
  const TunedKernel* find(const TuningKey& key) const;
  // Adds every entry of `other` (same signature), replacing those with equal keys.
  void merge(const TuningDb& other);

  std::string to_json() const;
  // Writes atomically: a temporary file beside `path`, then rename (creates directories).
  // Throws qforge::Error naming the path on failure.
  void save(const std::filesystem::path& path) const;

 private:
  std::string signature_;
  std::unordered_map<TuningKey, TunedKernel, TuningKeyHash> entries_;
};

struct TuningDbLoad {
  std::optional<TuningDb> db;         // set when the file was accepted
  std::string error;                  // why it was rejected ("" when accepted)
  std::vector<std::string> warnings;  // entries dropped from an accepted file
};

// Reads `path` for CPU `signature`; never throws.
TuningDbLoad load_tuning_db(const std::filesystem::path& path, const std::string& signature);
// The same from text already read; `origin` names it in messages.
TuningDbLoad parse_tuning_db(std::string_view text, const std::string& signature,
                             const std::string& origin);

}  // namespace qforge
