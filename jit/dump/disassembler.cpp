#include "jit/dump/disassembler.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cstdio>

#include "jit/base/error.h"

namespace qforge {
namespace {

constexpr std::size_t kHexColumnBytes = 11;  // longer encodings push their text right

class Decoder {
 public:
  Decoder() {
    QF_REQUIRE(
        ZYAN_SUCCESS(ZydisDecoderInit(&decoder_, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)),
        "disassembler: Zydis decoder initialisation failed");
    QF_REQUIRE(ZYAN_SUCCESS(ZydisFormatterInit(&formatter_, ZYDIS_FORMATTER_STYLE_INTEL)),
               "disassembler: Zydis formatter initialisation failed");
    ZydisFormatterSetProperty(&formatter_, ZYDIS_FORMATTER_PROP_ADDR_PADDING_ABSOLUTE,
                              ZYDIS_PADDING_DISABLED);
    ZydisFormatterSetProperty(&formatter_, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
  }

  // Decodes the instruction at the start of `bytes`; false if they are not one.
  bool decode(std::span<const std::uint8_t> bytes) {
    return ZYAN_SUCCESS(
        ZydisDecoderDecodeFull(&decoder_, bytes.data(), bytes.size(), &instruction_, operands_));
  }
  const ZydisDecodedInstruction& instruction() const { return instruction_; }

  // Intel syntax of the last decoded instruction, located at `offset` (branch targets
  // print as offsets), with `{vex} ` on VEX-encoded VNNI.
  std::string text(std::size_t offset) const {
    char buffer[256];
    if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&formatter_, &instruction_, operands_,
                                                      instruction_.operand_count_visible, buffer,
                                                      sizeof buffer, offset, nullptr)))
      return "(unformattable)";
    std::string text = buffer;
    if (is_vex_vnni() && !text.starts_with("{vex}")) text = "{vex} " + text;
    return text;
  }

 private:
  bool is_vex_vnni() const {
    if (instruction_.encoding != ZYDIS_INSTRUCTION_ENCODING_VEX) return false;
    switch (instruction_.mnemonic) {
      case ZYDIS_MNEMONIC_VPDPBUSD:
      case ZYDIS_MNEMONIC_VPDPBUSDS:
      case ZYDIS_MNEMONIC_VPDPWSSD:
      case ZYDIS_MNEMONIC_VPDPWSSDS:
        return true;
      default:
        return false;
    }
  }

  ZydisDecoder decoder_;
  ZydisFormatter formatter_;
  ZydisDecodedInstruction instruction_;
  ZydisDecodedOperand operands_[ZYDIS_MAX_OPERAND_COUNT];
};

std::string hex_bytes(std::span<const std::uint8_t> bytes) {
  std::string out;
  char byte[4];
  for (const std::uint8_t b : bytes) {
    std::snprintf(byte, sizeof byte, "%02x ", b);
    out += byte;
  }
  if (!out.empty()) out.pop_back();
  return out;
}

std::string instruction_line(std::size_t offset, std::span<const std::uint8_t> bytes,
                             const std::string& text) {
  char head[16];
  std::snprintf(head, sizeof head, "%08zx  ", offset);
  std::string line = head + hex_bytes(bytes);
  line.resize(std::max(line.size() + 2, 10 + 3 * kHexColumnBytes), ' ');
  return line + text + "\n";
}

}  // namespace

std::size_t instruction_stream_size(std::span<const std::uint8_t> code,
                                    const std::vector<CodeMark>& marks) {
  std::size_t last_mark = 0;
  for (const CodeMark& m : marks) last_mark = std::max(last_mark, m.offset);
  Decoder decoder;
  std::size_t offset = 0;
  while (offset < code.size()) {
    if (!decoder.decode(code.subspan(offset))) {
      ++offset;
      continue;
    }
    offset += decoder.instruction().length;
    if (decoder.instruction().mnemonic == ZYDIS_MNEMONIC_RET && offset > last_mark) return offset;
  }
  return code.size();
}

Disassembly disassemble(std::span<const std::uint8_t> code, std::size_t stream_size,
                        const std::vector<CodeMark>& marks) {
  QF_REQUIRE(stream_size <= code.size(), "disassembler: instruction stream of ", stream_size,
             " bytes is longer than the ", code.size(), "-byte buffer");
  Disassembly out;
  Decoder decoder;
  std::size_t next_mark = 0;
  std::size_t offset = 0;
  while (offset < stream_size) {
    for (; next_mark < marks.size() && marks[next_mark].offset <= offset; ++next_mark)
      out.listing += "; ---- " + marks[next_mark].label + " ----\n";
    const auto rest = code.subspan(offset, stream_size - offset);
    if (!decoder.decode(rest)) {
      char text[16];
      std::snprintf(text, sizeof text, "db 0x%02x", rest[0]);
      out.listing += instruction_line(offset, rest.first(1), text);
      ++offset;
      continue;
    }
    const std::size_t length = decoder.instruction().length;
    out.listing += instruction_line(offset, rest.first(length), decoder.text(offset));
    ++out.instruction_count;
    offset += length;
  }
  for (; next_mark < marks.size(); ++next_mark)
    out.listing += "; ---- " + marks[next_mark].label + " ----\n";
  if (code.size() > stream_size)
    out.listing += "; data: " + std::to_string(code.size() - stream_size) + " bytes\n";
  return out;
}

}  // namespace qforge
