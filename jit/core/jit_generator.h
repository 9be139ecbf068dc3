// Base of every qforge code generator: an Xbyak::CodeGenerator that never maps its code
// writable and executable at once, and that records named marks (where the K loop, a
// group's dequantization, the epilogue begin) for `qforge dump-asm`.
//
//   generate() -> emit into a RW buffer -> finalize(): readyRE() flips it to R+X
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <xbyak/xbyak.h>

namespace qforge {

struct CodeMark {
  std::size_t offset;  // bytes from the entry point
  std::string label;
};

class JitGenerator : public Xbyak::CodeGenerator {
 public:
  explicit JitGenerator(std::size_t max_code_bytes)
      : Xbyak::CodeGenerator(max_code_bytes, Xbyak::DontSetProtectRWE) {}

  // Makes the code read + execute (never write) and returns the entry point.
  const std::uint8_t* finalize() {
    readyRE();           // resolves labels (flips protection only for AutoGrow buffers)
    setProtectModeRE();  // so flip our fixed buffer here: R+X, never W+X
    return getCode();
  }
  const std::vector<CodeMark>& marks() const { return marks_; }

 protected:
  void mark(std::string label) { marks_.push_back({getSize(), std::move(label)}); }

 private:
  std::vector<CodeMark> marks_;
};

}  // namespace qforge
