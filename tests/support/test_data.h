// The texts in tests/data (calibration and evaluation texts of the shipped models).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace qforge::test {

// The whole of tests/data/<name>; empty when it cannot be read (the caller's checks then fail).
inline std::string read_test_data(const std::string& name) {
  std::ifstream in(std::string(QFORGE_SOURCE_ROOT) + "/tests/data/" + name, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace qforge::test
