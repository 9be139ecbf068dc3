// How one kernel call is shared by the thread pool's threads:
//
//              units 0 .. U (16 columns each)
//            +-------+-------+-------+-----+
//   rows     | chunk   | chunk | chunk |.|.|      units: each thread that is free takes
//   0 .. M   |         |       |       | | |             1 / (2 T) of the units left (all
//            +---------+-------+-------+-+-+             rows of them), down to one unit;
//                                                          a GEMV (M <= kStreamingRows):
//                                                          1 / T, down to kMinChunkBytes,
//                                                          in whole unit blocks
//
//            +---------------------------+
//            |  thread 0: rows [0, M/T)  |      rows:  thread t runs rows [M t/T, M (t+1)/T)
//            +---------------------------+             of every unit (all panels; large M)
//            |  thread 1                 |
//            +---------------------------+
//
// A call under kMinOpsToSplit operations runs on the caller alone (waking a thread costs
// more than it saves), and a row split with fewer rows than threads splits by units.
// Either way every output element is computed by the same instructions on the same
// operands, so the split never changes a result.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "jit/gemm/gemm_args.h"
#include "jit/kernel/epilogue.h"
#include "ops/linear/thread_pool.h"
#include "ops/quant/activation.h"
#include "ops/quant/float_activations.h"

namespace qforge {

inline constexpr double kMinOpsToSplit = 2.0 * (1 << 20);
inline constexpr std::int64_t kGuidedShare = 2;  // a chunk is 1 / (2 * threads) of the rest
// A GEMV streams its weights from memory once, and each chunk is a kernel call whose panel
// streams start cold (a memory latency and the prefetchers' ramp: about a microsecond per
// chunk on a 2-core guest). Its tail of single units cost an int4-g128 2048 x 2048 GEMV
// 10-15% there, so calls of at most kStreamingRows rows take 1 / (kStreamingShare *
// threads) of the rest, and never less than kMinChunkBytes of weights (or what is left).
inline constexpr std::int64_t kStreamingRows = 4;
inline constexpr std::int64_t kStreamingShare = 1;
inline constexpr std::int64_t kMinChunkBytes = 64 << 10;

// The fewest units a chunk of a call with `m` rows is dealt (see above).
inline std::int64_t min_chunk_units(std::int64_t m, std::int64_t unit_bytes) {
  if (m > kStreamingRows || unit_bytes <= 0) return 1;
  return std::max<std::int64_t>(1, (kMinChunkBytes + unit_bytes - 1) / unit_bytes);
}

// The units a call's threads share: how many, the weight bytes one unit's panels hold, and
// the kernel's unit block (NR units, its register tile's columns).
struct CallUnits {
  std::int64_t count = 0;
  std::int64_t bytes_each = 0;
  std::int64_t block = 1;
};

// The next chunk of a call with `m` rows on `threads` threads when `left` units remain.
// A GEMV's chunk of at least one unit block is cut to whole blocks (or rounded up to them
// where a cut would fall under the minimum): a tile of fewer units reads fewer panel
// streams side by side and streams slower. A 2048-column int4 GEMV in 1 x 7 tiles on two
// threads was dealt 64, 32, 16, 8, 4, 4 units, a 1, 4, 2, 1, 4 and 4-unit tile among them;
// it is now dealt 63, 28, 14, 7, 7, 4, 4, 1, its short tiles all at the end.
inline std::int64_t next_chunk_units(const CallUnits& units, std::int64_t m, int threads,
                                     std::int64_t left) {
  const std::int64_t share = (m <= kStreamingRows ? kStreamingShare : kGuidedShare) * threads;
  const std::int64_t least = min_chunk_units(m, units.bytes_each);
  std::int64_t size = std::max(least, left / share);
  if (m <= kStreamingRows && units.block > 1 && size >= units.block) {
    const std::int64_t whole = size - size % units.block;
    size = whole >= least ? whole : (least + units.block - 1) / units.block * units.block;
  }
  return std::min(left, size);
}

// What moving a call's first row needs besides the call itself.
struct CallRows {
  std::int64_t a_row_stride = 0;     // bytes between rows of activations (s8 or f32)
  std::int64_t groups = 0;           // activation group sums per row
  std::int64_t c_element_bytes = 4;  // f32 output, or 1 for u8
};
CallRows call_rows_of(const QuantizedActivations& x, const Epilogue& epilogue);
CallRows call_rows_of(const FloatActivations& x, const Epilogue& epilogue);

// `call` restricted to rows [first, end).
GemmCallArgs rows_of(const GemmCallArgs& call, const CallRows& rows, std::int64_t first,
                     std::int64_t end);

// Runs `run(part)` for each thread's part of `call` (units [0, units.count), rows [0, call.m)).
template <typename Run>
void run_split(const GemmCallArgs& call, const CallUnits& call_units, double ops,
               const CallRows& rows, ThreadSplit split, ThreadPool& pool, Run&& run) {
  const int threads = pool.size();
  const std::int64_t units = call_units.count;
  if (ops < kMinOpsToSplit || threads == 1) {
    GemmCallArgs all = call;
    all.unit_begin = 0;
    all.unit_end = units;
    run(all);
    return;
  }
  if (split == ThreadSplit::rows && call.m >= threads) {
    pool.run([&](int t) {
      GemmCallArgs mine = rows_of(call, rows, call.m * t / threads, call.m * (t + 1) / threads);
      mine.unit_begin = 0;
      mine.unit_end = units;
      run(mine);
    });
    return;
  }
  // Units are dealt in shrinking chunks (guided scheduling): each thread that finishes a
  // chunk takes 1 / (kGuidedShare * threads) of what is left (a GEMV: see kStreamingRows),
  // so the first chunks are long streams and the last ones short, and the threads finish
  // together. A thread the host slows down (a vCPU descheduled for a while) simply takes
  // fewer.
  std::atomic<std::int64_t> next{0};
  pool.run([&](int) {
    GemmCallArgs mine = call;
    std::int64_t begin = next.load(std::memory_order_relaxed);
    while (begin < units) {
      const std::int64_t size = next_chunk_units(call_units, call.m, threads, units - begin);
      if (!next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) continue;
      mine.unit_begin = begin;
      mine.unit_end = begin + size;
      run(mine);
      begin = next.load(std::memory_order_relaxed);
    }
  });
}

}  // namespace qforge
