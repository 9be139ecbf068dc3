#include "cli/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace qforge::cli {

bool ProgressBar::stderr_is_terminal() {
  return isatty(STDERR_FILENO) == 1;
}

ProgressBar::ProgressBar(std::string label, bool quiet)
    : label_(std::move(label)),
      enabled_(!quiet && stderr_is_terminal()),
      start_(std::chrono::steady_clock::now()) {}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::update(long long done, long long total, const std::string& unit) {
  if (!enabled_ || total <= 0) return;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * std::min(done, total) / total);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(stderr, "\r%s [%s] %lld/%lld %s %.1f s\x1b[K", label_.c_str(), bar.c_str(), done,
               total, unit.c_str(), seconds);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\x1b[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace qforge::cli
