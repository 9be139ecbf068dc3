// Where tests find the shipped real models: $QFORGE_MODELS, else ../shared/models beside
// the repository root. A missing model is a test failure that says where it looked.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "jit/base/error.h"

namespace qforge::test {

inline std::filesystem::path models_dir() {
  if (const char* env = std::getenv("QFORGE_MODELS"); env && *env) return env;
  return std::filesystem::path(QFORGE_SOURCE_ROOT) / ".." / "shared" / "models";
}

// Returns the path of models_dir()/relative, or throws naming where it looked.
inline std::string model_path(const std::string& relative) {
  const std::filesystem::path path = models_dir() / relative;
  if (!std::filesystem::exists(path))
    fail("model file not found: ", path.string(),
         " (set QFORGE_MODELS or place the models in ../shared/models beside the repository)");
  return path.lexically_normal().string();
}

}  // namespace qforge::test
