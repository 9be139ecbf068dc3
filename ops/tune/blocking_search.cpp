#include "ops/tune/blocking_search.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "jit/base/error.h"
#include "jit/gemm/blocking_space.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"

namespace qforge {
namespace {

constexpr double kMinSampleUs = 200;  // calls per sample are batched up to this
constexpr int kFirstRoundSamples = 3;
constexpr int kDefaultSamples = 7;
constexpr int kConfirmPairs = 5;
constexpr double kPruneRatio = 1.2;  // a candidate this much slower than the best is dropped
constexpr double kNoiseFloor = 0.01;

struct Candidate {
  explicit Candidate(const Blocking& b) : blocking(b) {}
  Blocking blocking;
  std::unique_ptr<GemmGenerator> code;
  std::vector<std::vector<double>> samples;  // per M
  double score = 0;                          // mean over M of median / default's median
};

class Search {
 public:
  Search(const GemmKey& shape, KernelBench& bench, SteadyClock::time_point deadline,
         const std::function<void()>& on_step)
      : shape_(shape), bench_(bench), deadline_(deadline), on_step_(on_step) {}

  SearchResult run();

 private:
  bool expired() const { return SteadyClock::now() >= deadline_; }
  // Generates the kernel (false if the generator refuses the blocking).
  bool prepare(Candidate& c);
  // Appends `samples` samples per M; false if the deadline passed first.
  bool measure(Candidate& c, int samples);
  double score(const Candidate& c) const;
  // Successive halving over `pool`; returns the index of the best timed candidate.
  std::size_t halve(std::vector<Candidate>& pool);

  GemmKey shape_;
  KernelBench& bench_;
  SteadyClock::time_point deadline_;
  const std::function<void()>& on_step_;
  std::vector<int> calls_per_sample_;
  std::vector<double> base_us_;  // default's medians, the unit of every score
  int timings_ = 0;
};

double median_of(std::vector<double> v) {
  return stats_of(std::move(v)).median_us;
}

bool Search::prepare(Candidate& c) {
  if (c.code) return true;
  GemmKey key = shape_;
  key.blocking = c.blocking;
  try {
    c.code = std::make_unique<GemmGenerator>(key);
  } catch (const Error&) {
    return false;
  }
  c.samples.assign(bench_.ms().size(), {});
  for (std::size_t i = 0; i < bench_.ms().size(); ++i) bench_.call(*c.code, i);
  return true;
}

bool Search::measure(Candidate& c, int samples) {
  for (int s = 0; s < samples; ++s) {
    if (expired()) return false;
    for (std::size_t i = 0; i < bench_.ms().size(); ++i)
      c.samples[i].push_back(bench_.time_calls(*c.code, i, calls_per_sample_[i]));
  }
  ++timings_;
  if (on_step_) on_step_();
  return true;
}

double Search::score(const Candidate& c) const {
  double sum = 0;
  for (std::size_t i = 0; i < c.samples.size(); ++i) sum += median_of(c.samples[i]) / base_us_[i];
  return sum / double(c.samples.size());
}

std::size_t Search::halve(std::vector<Candidate>& pool) {
  std::vector<std::size_t> alive;
  for (std::size_t i = 0; i < pool.size(); ++i)
    if (prepare(pool[i])) alive.push_back(i);
  std::vector<bool> timed(pool.size(), false);
  for (int samples = kFirstRoundSamples; alive.size() > 1 && !expired(); samples *= 2) {
    std::vector<std::size_t> measured;
    for (std::size_t i : alive) {
      if (!measure(pool[i], samples)) break;
      pool[i].score = score(pool[i]);
      timed[i] = true;
      measured.push_back(i);
    }
    if (measured.empty()) break;
    std::sort(measured.begin(), measured.end(),
              [&](std::size_t a, std::size_t b) { return pool[a].score < pool[b].score; });
    const double best = pool[measured.front()].score;
    std::erase_if(measured, [&](std::size_t i) { return pool[i].score > best * kPruneRatio; });
    measured.resize(std::max<std::size_t>(1, (measured.size() + 1) / 2));
    alive = measured;
    // Generated code of the dropped candidates is released as they leave.
    for (std::size_t i = 0; i < pool.size(); ++i)
      if (std::find(alive.begin(), alive.end(), i) == alive.end()) pool[i].code.reset();
  }
  std::size_t best = pool.size();
  for (std::size_t i : alive)
    if (timed[i] && (best == pool.size() || pool[i].score < pool[best].score)) best = i;
  if (best == pool.size()) best = alive.empty() ? 0 : alive.front();  // nothing was timed
  return best;
}

SearchResult Search::run() {
  SearchResult result;
  result.default_blocking = default_blocking(shape_);
  result.best = result.default_blocking;
  const std::size_t ms = bench_.ms().size();

  Candidate base(result.default_blocking);
  QF_REQUIRE(prepare(base), "tune: the default blocking of ", kernel_name(shape_),
             " cannot be generated");
  calls_per_sample_.assign(ms, 1);
  for (std::size_t i = 0; i < ms; ++i) {
    double single = bench_.time_calls(*base.code, i, 1);
    for (int r = 0; r < 2; ++r) single = std::min(single, bench_.time_calls(*base.code, i, 1));
    calls_per_sample_[i] = std::max(1, static_cast<int>(std::ceil(kMinSampleUs / single)));
  }
  base_us_.assign(ms, 1.0);
  if (!measure(base, kDefaultSamples)) return result;
  for (std::size_t i = 0; i < ms; ++i) base_us_[i] = median_of(base.samples[i]);
  double first_spread = 0;
  for (const auto& s : base.samples) first_spread = std::max(first_spread, stats_of(s).spread);

  // Tiles: every MR x NR with the default's streaming parameters (the default first).
  const std::vector<Blocking> space = blocking_candidates(shape_);
  std::vector<Candidate> tiles;
  for (const Blocking& b : space)
    if (b.k_unroll == base.blocking.k_unroll &&
        b.prefetch_distance == base.blocking.prefetch_distance)
      tiles.emplace_back(b);
  Blocking tile = base.blocking;
  if (tiles.size() > 1) tile = tiles[halve(tiles)].blocking;
  tiles.clear();
  // Streaming: the chosen tile with every K unroll and prefetch distance.
  std::vector<Candidate> streams;
  for (const Blocking& b : space)
    if (b.mr == tile.mr && b.nr == tile.nr) streams.emplace_back(b);
  Blocking best = tile;
  if (streams.size() > 1) best = streams[halve(streams)].blocking;
  streams.clear();
  if (expired()) return result;

  // Confirmation: the default and the best, interleaved, so drift hits both alike.
  Candidate again(base.blocking), winner(best);
  if (!prepare(again) || !prepare(winner)) return result;
  for (int pair = 0; pair < kConfirmPairs; ++pair)
    if (!measure(again, 1) || !measure(winner, 1)) return result;
  result.default_us.resize(ms);
  result.best_us.resize(ms);
  double noise = std::max(kNoiseFloor, first_spread);
  double ratio = 0;
  for (std::size_t i = 0; i < ms; ++i) {
    result.default_us[i] = median_of(again.samples[i]);
    result.best_us[i] = median_of(winner.samples[i]);
    noise = std::max(noise, stats_of(again.samples[i]).spread);
    noise = std::max(noise, std::abs(result.default_us[i] - base_us_[i]) / base_us_[i]);
    ratio += result.best_us[i] / result.default_us[i];
  }
  ratio /= double(ms);
  result.noise = noise;
  result.finished = true;
  result.timings = timings_;
  if (!(best == base.blocking) && ratio < 1 - noise) {
    result.best = best;
    result.kept_default = false;
  } else {
    result.best_us = result.default_us;
  }
  return result;
}

}  // namespace

SearchResult search_blocking(const GemmKey& shape, KernelBench& bench,
                             SteadyClock::time_point deadline,
                             const std::function<void()>& on_step) {
  return Search(shape, bench, deadline, on_step).run();
}

}  // namespace qforge
