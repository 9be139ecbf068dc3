#include "cli/text_file.h"

#include <fstream>
#include <sstream>

#include "jit/base/error.h"

namespace qforge::cli {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open the text file");
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) fail(path, ": the text file is empty");
  return text.str();
}

}  // namespace qforge::cli
