// Writes a command's output file whole or not at all: "<path>.tmp", then a rename.
#pragma once

#include <string>

namespace qforge::cli {

// Throws qforge::Error naming `path` when it cannot be written.
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace qforge::cli
