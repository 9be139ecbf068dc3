// Readable listings of generated code (Zydis, Intel syntax), for `qforge dump-asm`.
//
//   ; ---- tile 1x8: K loop ----
//   0000002a  62 f2 75 48 50 04 24         vpdpbusd zmm0, zmm1, zmmword ptr [rsp]
//   ...
//   ; data: 1152 bytes
//
// Offsets are bytes from the entry point (the runtime address is 0, so branch targets
// print as offsets too). A generated kernel is one instruction stream ending in `ret`,
// followed by its 64-byte-aligned constant table, which is listed as data, not decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "jit/core/jit_generator.h"

namespace qforge {

struct Disassembly {
  std::string listing;  // one line per instruction, mark and data block
  std::size_t instruction_count = 0;
};

// Length of the instruction stream: the offset just after the first `ret` at or after
// the last mark (the whole buffer when there is no such `ret`).
std::size_t instruction_stream_size(std::span<const std::uint8_t> code,
                                    const std::vector<CodeMark>& marks);

// Lists code[0, stream_size) as instructions with the marks interleaved at their
// offsets; the bytes after stream_size are summarised as one data line.
Disassembly disassemble(std::span<const std::uint8_t> code, std::size_t stream_size,
                        const std::vector<CodeMark>& marks);

}  // namespace qforge
