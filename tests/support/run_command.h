// Runs a shell command and captures its exit status and combined stdout + stderr, for tests
// that drive the `qforge` binary (QFORGE_BINARY).
#pragma once

#include <sys/wait.h>
#include <cstdio>
#include <string>

namespace qforge::test {

struct CommandResult {
  int exit_code = -1;  // the process's exit status, -1 if it did not exit normally
  std::string output;  // stdout and stderr, interleaved
};

inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return result;
  char chunk[4096];
  std::size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) result.output.append(chunk, got);
  const int status = pclose(pipe);
  if (status != -1 && WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

}  // namespace qforge::test
