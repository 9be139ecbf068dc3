// What calibration records of one linear layer's input (a "site"), over every token it
// saw:
//
//   per input channel c:  absmax[c]   = max |x[t][c]|
//                         mean_abs[c] = sum |x[t][c]| / count
//                         mean_sq[c]  = sum x[t][c]^2 / count
//   on request:           gram        = sum x[t]^T x[t] / count     (k x k, double)
//                         samples     = every stride-th row x[t]     (rows x k; the stride
//                                       spreads at most `sample_rows` over the expected rows)
//
// SmoothQuant and AWQ scale channels by absmax / mean_abs; GPTQ's Hessian is 2 * gram.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "calib/gram.h"

namespace qforge {

struct SiteStatistics {
  std::string name;  // "blk.3.ffn_down", "output"
  int k = 0;
  std::uint64_t count = 0;  // tokens seen
  std::vector<float> absmax;
  std::vector<double> mean_abs, mean_sq;
  std::vector<double> gram;    // k x k, or empty
  std::vector<float> samples;  // sampled rows x k, or empty

  // max absmax / median absmax: how far the largest channel stands out.
  double outlier_ratio() const;
};

class SiteAccumulator {
 public:
  // sample_rows > 0: keep up to that many rows, spread over `expected_rows`.
  SiteAccumulator(std::string name, int k, bool gram, int sample_rows = 0,
                  std::uint64_t expected_rows = 0);

  void add(const float* x, int rows);  // rows x k
  SiteStatistics finish();             // the means of what was added
  const std::string& name() const { return name_; }
  int k() const { return k_; }

 private:
  std::string name_;
  int k_;
  std::uint64_t count_ = 0;
  std::vector<float> absmax_;
  std::vector<double> sum_abs_, sum_sq_;
  std::optional<GramAccumulator> gram_;
  std::uint64_t sample_stride_ = 0;  // 0: no samples
  std::size_t sample_limit_ = 0;
  std::vector<float> samples_;
};

}  // namespace qforge
