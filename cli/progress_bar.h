// A one-line progress bar on stderr, drawn only when stderr is a terminal and output is
// not machine-readable (--json); otherwise it prints nothing.
//
//   perplexity [##########..........]  12/24 chunks  3.1 s
#pragma once

#include <chrono>
#include <string>

namespace qforge::cli {

class ProgressBar {
 public:
  ProgressBar(std::string label, bool quiet = false);
  ~ProgressBar();  // ends the line if one was drawn

  void update(long long done, long long total, const std::string& unit = "");
  void finish();

  static bool stderr_is_terminal();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace qforge::cli
