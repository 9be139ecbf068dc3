// A per-process path in the temporary directory: <tmp>/qforge_<tag>_<pid>_<name>, so
// suites running at once do not share files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace qforge::test {

inline std::string temp_path(const std::string& tag, const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("qforge_" + tag + "_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

}  // namespace qforge::test
