// A plain read of the same bytes a decode call (or a whole decode step) reads, timed next
// to each call, for hosts whose memory bandwidth drifts by more than the effect measured
// (a shared guest: 40-80 GB/s within one run). bw_ratio divides by one bandwidth figure
// taken at the start; bw_ratio_paired divides by what a read of the same bytes, with the
// same threads of the same pool, achieved between the calls:
//
//   call(copy 0) probe(copy 0) call(copy 1) probe(copy 1) ...
//   bw_ratio_paired = median over turns t of  (call bytes / call_t) / (read bytes / probe_t)
//
// Each call is compared with the read right after it, not the medians of the two series with
// each other: such a guest also flips between bandwidth states (33-36 and 55-80 GB/s on a
// 2-core EPYC) for stretches of many turns. When a run holds both, each series' median lands
// near the boundary between them, on one state's tail, and the two tails need not match; a
// call and the read that follows it run within milliseconds of each other, in one state.
//
// The probe's buffers rotate like the caller's weight copies (same count, same size), so
// both read memory, not cache (bench_gemm); a decode step reads every weight once, so one
// copy of its bytes stays as cold as the weights are (qforge bench --paired-read). Each probe
// splits its copy into one contiguous part per thread and reads it with one of the two patterns of
// read_bandwidth_gbps in turn; the faster pattern (the smaller median ratio) is the reference.
//
// Consecutive probes read copies two or more apart, never the next one up (rotation_turn):
// a four-stream read primes the region after its copy (most likely the prefetchers
// running on past its end), and a one-stream read of the next copy then ran 1.4x a cold
// read of the same bytes (one thread, 2 MB copies, measured on a 2-core EPYC guest). The
// benches rotate their weight copies in the same order, so neither side is primed by the other.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "jit/base/aligned_buffer.h"
#include "jit/tune/machine_limits.h"
#include "ops/linear/thread_pool.h"

namespace qforge {

// The copy that turn t of a rotation through `copies` reads: (t * step) mod copies, step
// the smallest of 2, 3, ... below the count and coprime with it (every copy is read in
// turn, and never the one just above the last); step 1 for one or two copies.
inline int rotation_step(int copies) {
  for (int step = 2; step < copies; ++step)
    if (std::gcd(step, copies) == 1) return step;
  return 1;
}
inline int rotation_turn(std::int64_t turn, int copies) {
  return static_cast<int>(turn * rotation_step(copies) % copies);
}

// One timed read of a probe: its seconds and its pattern (the four-stream one or not).
struct ReadTurn {
  double seconds;
  bool four;
};

// The median of each read pattern's values, the smaller of the two (the one pattern's where
// only one has values; 0 where neither has).
inline double smaller_pattern_median(std::vector<double> (&by_pattern)[2]) {
  double smallest = 0;
  bool any = false;
  for (std::vector<double>& values : by_pattern) {
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    const double median = values[values.size() / 2];
    smallest = any ? std::min(smallest, median) : median;
    any = true;
  }
  return smallest;
}

// The median over turns of (call_bytes / call_seconds[t]) / (read_bytes / reads[t].seconds),
// taken over the turns of each pattern apart; the smaller of the two medians (the faster
// read is the reference). Turns past the shorter list, or with a time of 0, are skipped.
inline double median_paired_ratio(double call_bytes, double read_bytes,
                                  std::span<const double> call_seconds,
                                  std::span<const ReadTurn> reads) {
  std::vector<double> by_pattern[2];
  for (std::size_t t = 0; t < std::min(reads.size(), call_seconds.size()); ++t)
    if (call_seconds[t] > 0 && reads[t].seconds > 0)
      by_pattern[reads[t].four].push_back(call_bytes / call_seconds[t] /
                                          (read_bytes / reads[t].seconds));
  return smaller_pattern_median(by_pattern);
}

class PairedReadProbe {
 public:
  PairedReadProbe(std::int64_t bytes, int copies, ThreadPool& pool)
      : pool_(pool),
        copies_(copies),
        part_(static_cast<std::size_t>(bytes) / pool.size() / 128 * 128),
        stride_(part_ * pool.size()),
        buffer_(stride_ * copies),
        sink_(pool.size()) {
    std::memset(buffer_.data(), 1, buffer_.size());  // fault every page in first
  }

  // Reads copy rotation_turn(turn, copies) once and records the time under pattern `turn % 2`.
  void probe(int turn) {
    const std::uint8_t* base = buffer_.data() + rotation_turn(turn, copies_) * stride_;
    const bool four = turn % 2 != 0;
    const auto start = std::chrono::steady_clock::now();
    pool_.run([&](int t) {
      const std::uint8_t* p = base + t * part_;
      sink_[t] += four ? read_four_streams(p, part_) : read_stream(p, part_);
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    turns_.push_back({seconds, four});
  }

  // bw_ratio_paired of calls of `call_bytes` each, call_seconds[t] the call the t-th probe
  // followed (in the order of the probes).
  double paired_ratio(double call_bytes, std::span<const double> call_seconds) const {
    return median_paired_ratio(call_bytes, double(stride_), call_seconds, turns_);
  }

  // Seconds per read of all the bytes: the faster pattern's median (over all turns, whatever
  // state each ran in: the rate to print beside the call's, not the ratio's reference).
  double seconds() const {
    std::vector<double> by_pattern[2];
    for (const ReadTurn& turn : turns_) by_pattern[turn.four].push_back(turn.seconds);
    return smaller_pattern_median(by_pattern);
  }
  // The rate of the faster pattern, GB/s (of the layer's bytes rounded down to 128 per
  // thread, what one probe reads).
  double gbps() const { return double(stride_) / seconds() / 1e9; }

 private:
  ThreadPool& pool_;
  int copies_;
  std::size_t part_, stride_;
  AlignedBuffer<std::uint8_t> buffer_;
  std::vector<std::uint64_t> sink_;
  std::vector<ReadTurn> turns_;  // every probe in the order probed
};

}  // namespace qforge
