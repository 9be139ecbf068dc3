#include "jit/tune/call_policy_search.h"

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

SplitChoice choose_thread_split(GemmKernelFn kernel, KernelBench& bench,
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

CrossoverChoice find_gemm_crossover(GemmKernelFn gemv, GemmKernelFn gemm, KernelBench& bench,
                                    SteadyClock::time_point deadline) {
  const std::span<const std::int64_t> ms = bench.ms();
  QF_REQUIRE(std::equal(ms.begin(), ms.end(), kCrossoverRows.begin(), kCrossoverRows.end()),
             "tune: the GEMV/GEMM crossover is measured at its own rows");
  CrossoverChoice choice;
  auto with = [&](GemmKernelFn fn) {
    return [&, fn](std::size_t i, int calls) { return bench.time_calls(fn, i, calls); };
  };
  std::vector<double> noise;
  if (!measure_pairs(bench, deadline, with(gemv), with(gemm), choice.gemv_us, choice.gemm_us,
                     noise))
    return choice;
  choice.finished = true;
  choice.noise = *std::max_element(noise.begin(), noise.end());
  // From the largest M down: the threshold moves below each M the GEMM kernel wins.
  const std::size_t count = ms.size();
  choice.gemm_min_m = static_cast<int>(ms[count - 1] + 1);
  for (std::size_t j = count; j-- > 0;) {
    const bool gemm_wins = choice.gemm_us[j] < choice.gemv_us[j] * (1 - noise[j]);
    const bool gemv_wins = choice.gemv_us[j] < choice.gemm_us[j] * (1 - noise[j]);
    const bool gemm_here = gemm_wins || (!gemv_wins && ms[j] >= kDefaultGemmMinRows);
    if (!gemm_here) break;
    choice.gemm_min_m = static_cast<int>(ms[j]);
  }
  return choice;
}

}  // namespace qforge
