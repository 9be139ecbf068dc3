#include "ops/tune/call_policy_search.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"

namespace qforge {
namespace {

constexpr double kMinSampleUs = 200;  // calls per sample are batched up to this
constexpr int kPairs = 9;
constexpr double kNoiseFloor = 0.01;

// Median per M of two ways of calling (a, b), in interleaved samples, and the noise per
// M (the larger spread of the two, at least kNoiseFloor); false if the deadline passed.
template <typename CallA, typename CallB>
bool measure_pairs(KernelBench& bench, SteadyClock::time_point deadline, CallA&& a, CallB&& b,
                   std::vector<double>& a_us, std::vector<double>& b_us,
                   std::vector<double>& noise) {
  const std::size_t ms = bench.ms().size();
  a_us.assign(ms, 0);
  b_us.assign(ms, 0);
  noise.assign(ms, kNoiseFloor);
  for (std::size_t i = 0; i < ms; ++i) {
    const double single = std::max(a(i, 1), 1e-3);
    const int calls = std::max(1, static_cast<int>(std::ceil(kMinSampleUs / single)));
    std::vector<double> sa, sb;
    for (int p = 0; p < kPairs; ++p) {
      if (SteadyClock::now() >= deadline) return false;
      sa.push_back(a(i, calls));
      sb.push_back(b(i, calls));
    }
    const SampleStats ta = stats_of(sa), tb = stats_of(sb);
    a_us[i] = ta.median_us;
    b_us[i] = tb.median_us;
    noise[i] = std::max({kNoiseFloor, ta.spread, tb.spread});
  }
  return true;
}

}  // namespace

SplitChoice choose_thread_split(const GemmGenerator& kernel, KernelBench& bench,
                                SteadyClock::time_point deadline) {
  SplitChoice choice;
  auto by = [&](ThreadSplit split) {
    return
        [&, split](std::size_t i, int calls) { return bench.time_calls(kernel, i, calls, split); };
  };
  std::vector<double> noise;
  if (!measure_pairs(bench, deadline, by(ThreadSplit::units), by(ThreadSplit::rows),
                     choice.units_us, choice.rows_us, noise))
    return choice;
  choice.finished = true;
  choice.noise = *std::max_element(noise.begin(), noise.end());
  bool rows_win = true;
  for (std::size_t i = 0; i < choice.units_us.size(); ++i)
    rows_win = rows_win && choice.rows_us[i] < choice.units_us[i] * (1 - noise[i]);
  choice.split = rows_win ? ThreadSplit::rows : ThreadSplit::units;
  return choice;
}

CrossoverChoice find_crossover(const GemmGenerator& before, const GemmGenerator& after,
                               KernelBench& bench, SteadyClock::time_point deadline,
                               std::int64_t default_threshold) {
  const std::span<const std::int64_t> ms = bench.ms();
  CrossoverChoice choice;
  auto with = [&](const GemmGenerator& code) {
    return [&](std::size_t i, int calls) { return bench.time_calls(code, i, calls); };
  };
  std::vector<double> noise;
  if (!measure_pairs(bench, deadline, with(before), with(after), choice.before_us, choice.after_us,
                     noise))
    return choice;
  choice.finished = true;
  choice.noise = *std::max_element(noise.begin(), noise.end());
  // From the largest M down: the threshold moves below each M the `after` kernel wins.
  const std::size_t count = ms.size();
  choice.threshold = static_cast<int>(ms[count - 1] + 1);
  for (std::size_t j = count; j-- > 0;) {
    const bool after_wins = choice.after_us[j] < choice.before_us[j] * (1 - noise[j]);
    const bool before_wins = choice.before_us[j] < choice.after_us[j] * (1 - noise[j]);
    const bool after_here = after_wins || (!before_wins && ms[j] >= default_threshold);
    if (!after_here) break;
    choice.threshold = static_cast<int>(ms[j]);
  }
  return choice;
}

}  // namespace qforge
