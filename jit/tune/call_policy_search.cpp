#include "jit/tune/call_policy_search.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"

namespace qforge {
namespace {

constexpr double kMinSampleUs = 200;  // calls per sample are batched up to this
constexpr int kPairs = 7;
constexpr double kNoiseFloor = 0.01;

// Median per M of two ways of calling (a, b), in interleaved samples; false if the
// deadline passed first.
template <typename CallA, typename CallB>
bool measure_pairs(KernelBench& bench, SteadyClock::time_point deadline, CallA&& a, CallB&& b,
                   std::vector<double>& a_us, std::vector<double>& b_us, double& noise) {
  const std::size_t ms = bench.ms().size();
  a_us.assign(ms, 0);
  b_us.assign(ms, 0);
  noise = kNoiseFloor;
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
    noise = std::max({noise, ta.spread, tb.spread});
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
  if (!measure_pairs(bench, deadline, by(ThreadSplit::units), by(ThreadSplit::rows),
                     choice.units_us, choice.rows_us, choice.noise))
    return choice;
  choice.finished = true;
  bool rows_win = true;
  for (std::size_t i = 0; i < choice.units_us.size(); ++i)
    rows_win = rows_win && choice.rows_us[i] < choice.units_us[i] * (1 - choice.noise);
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
  if (!measure_pairs(bench, deadline, with(gemv), with(gemm), choice.gemv_us, choice.gemm_us,
                     choice.noise))
    return choice;
  choice.finished = true;
  // From the largest M down: the threshold moves below each M the GEMM kernel wins.
  const std::size_t count = ms.size();
  choice.gemm_min_m = static_cast<int>(ms[count - 1] + 1);
  for (std::size_t j = count; j-- > 0;) {
    const bool gemm_wins = choice.gemm_us[j] < choice.gemv_us[j] * (1 - choice.noise);
    const bool gemv_wins = choice.gemv_us[j] < choice.gemm_us[j] * (1 - choice.noise);
    const bool gemm_here = gemm_wins || (!gemv_wins && ms[j] >= kDefaultGemmMinRows);
    if (!gemm_here) break;
    choice.gemm_min_m = static_cast<int>(ms[j]);
  }
  return choice;
}

}  // namespace qforge
