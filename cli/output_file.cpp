#include "cli/output_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "jit/base/error.h"

namespace qforge::cli {

void write_file_atomically(const std::string& path, const std::string& contents) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    QF_REQUIRE(out, path, ": cannot write: ", std::strerror(errno));
    out << contents;
    out.flush();
    if (!out) {
      std::filesystem::remove(temp);
      fail(path, ": write failed: ", std::strerror(errno));
    }
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  if (error) {
    std::filesystem::remove(temp);
    fail(path, ": cannot rename ", temp, ": ", error.message());
  }
}

}  // namespace qforge::cli
