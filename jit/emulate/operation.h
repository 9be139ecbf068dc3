// One faulting instruction, decoded, with access to its operands: the common ground of
// every emulated instruction (register, memory and immediate operands, EVEX opmask
// merging/zeroing, embedded broadcast, vector length, rounding control).
//
//   operand(0)        the destination (also a source for read-modify-write instructions)
//   operand(1..n-1)   the sources, in Intel order
//
// The EVEX opmask ({k}) is not among these operands: mask() and zeroing() describe it.
#pragma once

#include <Zydis/Zydis.h>

#include <cstdint>

#include "jit/emulate/register_file.h"
#include "jit/emulate/vector.h"

namespace qforge::emulate {

enum class Status : std::uint8_t {
  kDone,         // emulated; the handler advances RIP past the instruction
  kUnsupported,  // an operand form this emulator does not implement
  kInvalid,      // the instruction faults on hardware (e.g. #UD for a bad AMX shape)
};

// MXCSR fields (Intel SDM vol. 1, 10.2.3).
inline constexpr std::uint32_t kMxcsrFlags = 0x3F;
inline constexpr std::uint32_t kMxcsrDaz = 1u << 6;
inline constexpr std::uint32_t kMxcsrMasks = 0x1F80;
inline constexpr std::uint32_t kMxcsrRoundingShift = 13;
inline constexpr std::uint32_t kMxcsrRounding = 3u << kMxcsrRoundingShift;
inline constexpr std::uint32_t kMxcsrFtz = 1u << 15;

// Rounding control values (MXCSR.RC, EVEX.RC and imm8[1:0] share this encoding).
enum RoundingControl : unsigned { kRoundNearest = 0, kRoundDown = 1, kRoundUp = 2, kRoundZero = 3 };

class Operation {
 public:
  static constexpr unsigned kMaxOperands = 6;

  Operation(const ZydisDecodedInstruction& instruction, const ZydisDecodedOperand* operands,
            RegisterFile& registers);

  // False for forms no instruction here takes (segment overrides, VSIB, too many operands).
  bool decodable() const { return decodable_; }

  const ZydisDecodedInstruction& instruction() const { return instruction_; }
  ZydisMnemonic mnemonic() const { return instruction_.mnemonic; }
  RegisterFile& registers() { return registers_; }
  bool is_evex() const { return instruction_.encoding == ZYDIS_INSTRUCTION_ENCODING_EVEX; }

  unsigned operand_count() const { return count_; }
  const ZydisDecodedOperand& operand(unsigned i) const { return *operands_[i]; }
  bool is_memory(unsigned i) const { return operand(i).type == ZYDIS_OPERAND_TYPE_MEMORY; }
  bool is_immediate(unsigned i) const { return operand(i).type == ZYDIS_OPERAND_TYPE_IMMEDIATE; }
  bool is_vector_register(unsigned i) const;
  bool is_gpr(unsigned i) const;
  bool is_opmask_register(unsigned i) const;
  // Number of a zmm/ymm/xmm, k or tmm register operand.
  unsigned register_index(unsigned i) const;
  // Size of operand i in bytes, and of one of its elements.
  unsigned bytes(unsigned i) const { return operand(i).size / 8; }
  unsigned element_bytes(unsigned i) const;

  // The instruction's vector length in bytes: 16, 32 or 64.
  unsigned vector_bytes() const { return instruction_.avx.vector_length / 8; }

  // EVEX opmask: masked() is false for k0 / no mask; mask() is then all ones.
  bool masked() const { return mask_register_ != 0; }
  bool zeroing() const;
  std::uint64_t mask() const { return mask_; }
  bool selected(unsigned element) const { return (mask_ >> element) & 1u; }

  bool embedded_broadcast() const;

  // Effective address of memory operand i: base + index * scale + disp (RIP-relative from
  // the next instruction). The AMX forms split it into row 0 and stride themselves.
  std::uint64_t address(unsigned i) const;
  std::uint64_t base_plus_displacement(unsigned i) const;
  std::uint64_t scaled_index(unsigned i) const;

  // Value of source operand i. Vector registers: all 512 bits. GPRs and opmasks: the low
  // 8 bytes. Memory: bytes(i) bytes; an embedded broadcast is replicated over the vector
  // length.
  Vec source(unsigned i) const;
  // The same for an operand read element by element alongside the destination: when it
  // is a memory operand of the destination's size and element size, the elements the
  // opmask leaves out are not read (hardware suppresses their faults) and read as zero.
  Vec source_masked(unsigned i) const;
  // The instruction's imm8 (its last operand).
  std::uint8_t immediate() const;

  // Writes the low `result_bytes` of `result` (default: bytes(0)) to the destination:
  // selected elements (of element_bytes(0)) take the result, the others keep their old
  // value or become zero ({z}); a register destination is zeroed above result_bytes.
  // Memory destinations receive only the selected elements.
  void write_destination(const Vec& result) { write_destination(result, bytes(0)); }
  void write_destination(const Vec& result, unsigned result_bytes);
  // The same without the opmask.
  void write_destination_unmasked(const Vec& result) {
    write_destination_unmasked(result, bytes(0));
  }
  void write_destination_unmasked(const Vec& result, unsigned result_bytes);

  // Rounding control for this instruction: EVEX embedded rounding, else MXCSR.RC.
  unsigned rounding_control() const;
  // MXCSR of the interrupted thread.
  std::uint32_t guest_mxcsr() const { return registers_.mxcsr(); }
  // For instructions that neither consult nor update MXCSR flags (BF16 conversions).
  void suppress_float_flags() { report_float_flags_ = false; }
  bool reports_float_flags() const { return report_float_flags_ && !instruction_.avx.has_sae; }

 private:
  const ZydisDecodedInstruction& instruction_;
  RegisterFile& registers_;
  const ZydisDecodedOperand* operands_[kMaxOperands] = {};
  unsigned count_ = 0;
  unsigned mask_register_ = 0;
  std::uint64_t mask_ = ~std::uint64_t{0};
  bool decodable_ = true;
  bool report_float_flags_ = true;
};

void read_memory(std::uint64_t address, void* out, unsigned bytes);
void write_memory(std::uint64_t address, const void* in, unsigned bytes);

}  // namespace qforge::emulate
