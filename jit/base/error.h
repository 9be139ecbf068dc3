// qforge error type: every user-facing failure is a qforge::Error whose message names
// the thing that was wrong (file, field, argument) and what was expected.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace qforge {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds a message from any streamable pieces: fail("K = ", k, " is not a multiple of 4").
template <typename... Parts>
[[noreturn]] void fail(Parts&&... parts) {
  std::ostringstream out;
  (out << ... << std::forward<Parts>(parts));
  throw Error(out.str());
}

// Checks a condition that depends on input (never a programming invariant).
#define QF_REQUIRE(cond, ...)                 \
  do {                                        \
    if (!(cond)) ::qforge::fail(__VA_ARGS__); \
  } while (0)

}  // namespace qforge
