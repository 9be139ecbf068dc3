#include "serve/stop_strings.h"

#include <algorithm>

namespace qforge::serve {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStrings::push(std::string_view text) {
  if (stopped_) return {};
  held_.append(text);
  // The earliest stop string in what is held ends the text there.
  std::size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold the longest tail that is the start of some stop string.
  std::size_t keep = 0;
  for (const std::string& stop : stops_) {
    const std::size_t most = std::min(stop.size() - 1, held_.size());
    for (std::size_t n = most; n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out;
  if (!stopped_) out.swap(held_);
  return out;
}

}  // namespace qforge::serve
