#include "jit/core/perf_map.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace qforge {

bool perf_map_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("QFORGE_PERF_MAP");
    return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

void note_generated_code(const void* start, std::size_t bytes, std::string_view name) {
  if (!perf_map_enabled()) return;
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  std::FILE* file = std::fopen(path.c_str(), "a");
  if (file == nullptr) return;  // profiling aid only: the kernel runs either way
  std::fprintf(file, "%zx %zx %.*s\n", reinterpret_cast<std::size_t>(start), bytes,
               static_cast<int>(name.size()), name.data());
  std::fclose(file);
}

}  // namespace qforge
