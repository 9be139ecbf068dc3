// Reads a text file a command evaluates (perplexity, bench -f); an unreadable or empty
// file is an error naming it.
#pragma once

#include <string>

namespace qforge::cli {

std::string read_text_file(const std::string& path);

}  // namespace qforge::cli
