// The paired read's ratio: each call against the read that followed it, per read pattern,
// the faster pattern the reference, on times built so that the answer is known exactly.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "ops/tune/paired_read.h"

namespace qforge {
namespace {

// 40 turns, the host's bandwidth in one of two states for stretches of turns (the slow one
// 1.7x the time), each turn's time jittered by up to 20% (the call and its read alike).
// The call reads 0.9 of the read's rate in every turn; the four-stream reads run 5% slower
// than the one-stream ones, so the one-stream pattern is the reference.
TEST(PairedRead, EachCallIsComparedWithTheReadAfterIt) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  const double call_bytes = 3e6, read_bytes = 2e6;
  std::vector<double> calls;
  std::vector<ReadTurn> reads;
  for (int t = 0; t < 40; ++t) {
    const bool slow = (t / 7) % 2 == 1;  // 7 turns in one state, 7 in the other, ...
    const double unit = (slow ? 1.7 : 1.0) * jitter(rng);
    const bool four = t % 2 == 1;
    const double read_seconds = read_bytes * 1e-9 * unit * (four ? 1.05 : 1.0);
    // call rate = 0.9 x one-stream read rate of the same turn
    calls.push_back(call_bytes * 1e-9 * unit / 0.9);
    reads.push_back({read_seconds, four});
  }
  EXPECT_NEAR(median_paired_ratio(call_bytes, read_bytes, calls, reads), 0.9, 1e-12);
}

TEST(PairedRead, OnePatternOrMissingTimesAreHandled) {
  const std::vector<double> calls = {2.0, 0.0, 2.0, 4.0};
  const std::vector<ReadTurn> one_pattern = {{1.0, false}, {1.0, false}, {1.5, false}};
  // Turn 1 has no call time and turn 3 no read: ratios 0.5 and 0.75, median the upper one.
  EXPECT_DOUBLE_EQ(median_paired_ratio(1.0, 1.0, calls, one_pattern), 0.75);
  EXPECT_EQ(median_paired_ratio(1.0, 1.0, {}, one_pattern), 0.0);
}

}  // namespace
}  // namespace qforge
