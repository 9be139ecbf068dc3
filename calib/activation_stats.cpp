#include "calib/activation_stats.h"

#include <algorithm>
#include <cmath>

#include "jit/base/error.h"

namespace qforge {

double SiteStatistics::outlier_ratio() const {
  if (absmax.empty()) return 0.0;
  std::vector<float> sorted = absmax;
  const auto mid = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), mid, sorted.end());
  const double median = *mid;
  const double top = *std::max_element(absmax.begin(), absmax.end());
  return median > 0 ? top / median : 0.0;
}

SiteAccumulator::SiteAccumulator(std::string name, int k, bool gram, int sample_rows,
                                 std::uint64_t expected_rows)
    : name_(std::move(name)),
      k_(k),
      absmax_(static_cast<std::size_t>(k), 0.f),
      sum_abs_(static_cast<std::size_t>(k), 0.0),
      sum_sq_(static_cast<std::size_t>(k), 0.0) {
  if (gram) gram_.emplace(k);
  if (sample_rows > 0) {
    sample_stride_ = std::max<std::uint64_t>(1, expected_rows / std::uint64_t(sample_rows));
    sample_limit_ = static_cast<std::size_t>(sample_rows);
  }
}

void SiteAccumulator::add(const float* x, int rows) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + static_cast<std::size_t>(r) * k_;
    for (int c = 0; c < k_; ++c) {
      const float v = row[c];
      absmax_[c] = std::max(absmax_[c], std::abs(v));
      sum_abs_[c] += std::abs(v);
      sum_sq_[c] += double(v) * v;
    }
  }
  if (gram_) gram_->add(x, rows);
  for (int r = 0; sample_stride_ > 0 && r < rows; ++r)
    if ((count_ + std::uint64_t(r)) % sample_stride_ == 0 &&
        samples_.size() / std::size_t(k_) < sample_limit_)
      samples_.insert(samples_.end(), x + std::size_t(r) * k_, x + std::size_t(r + 1) * k_);
  count_ += static_cast<std::uint64_t>(rows);
}

SiteStatistics SiteAccumulator::finish() {
  QF_REQUIRE(count_ > 0, "calibration: site ", name_, " saw no tokens");
  SiteStatistics s;
  s.name = name_;
  s.k = k_;
  s.count = count_;
  s.absmax = absmax_;
  const double n = static_cast<double>(count_);
  s.mean_abs.resize(sum_abs_.size());
  s.mean_sq.resize(sum_sq_.size());
  for (std::size_t c = 0; c < sum_abs_.size(); ++c) {
    s.mean_abs[c] = sum_abs_[c] / n;
    s.mean_sq[c] = sum_sq_[c] / n;
  }
  s.samples = samples_;
  if (gram_) {
    s.gram.assign(gram_->sum().begin(), gram_->sum().end());
    for (double& g : s.gram) g /= n;
  }
  return s;
}

}  // namespace qforge
