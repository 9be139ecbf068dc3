// The fuzz targets of readers that open a path: each input is written to one file per
// process in /dev/shm (memory; the temporary directory where there is none) and read back
// from there.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

namespace qforge::fuzz {

inline std::string input_path(const char* name) {
  const std::filesystem::path dir =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  return (dir / ("qforge_fuzz_" + std::to_string(::getpid()) + "_" + name)).string();
}

// Writes `data` to the path `input_path(name)` and returns that path.
inline std::string write_input(const char* name, const std::uint8_t* data, std::size_t size) {
  const std::string path = input_path(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();  // the harness itself is broken
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

// A broken property of an accepted input: abort, so the fuzzer keeps the input.
[[noreturn]] inline void property_failed(const char* what) {
  std::fprintf(stderr, "fuzz property failed: %s\n", what);
  std::fflush(stderr);
  __builtin_trap();
}

}  // namespace qforge::fuzz
