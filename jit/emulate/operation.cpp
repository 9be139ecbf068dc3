#include "jit/emulate/operation.h"

#include <cstring>

namespace qforge::emulate {

void read_memory(std::uint64_t address, void* out, unsigned bytes) {
  std::memcpy(out, reinterpret_cast<const void*>(address), bytes);
}

void write_memory(std::uint64_t address, const void* in, unsigned bytes) {
  std::memcpy(reinterpret_cast<void*>(address), in, bytes);
}

Operation::Operation(const ZydisDecodedInstruction& instruction,
                     const ZydisDecodedOperand* operands, RegisterFile& registers)
    : instruction_(instruction), registers_(registers) {
  for (unsigned i = 0; i < instruction.operand_count_visible; ++i) {
    const ZydisDecodedOperand& op = operands[i];
    if (op.encoding == ZYDIS_OPERAND_ENCODING_MASK) {
      mask_register_ = static_cast<unsigned>(ZydisRegisterGetId(op.reg.value));
      continue;
    }
    if (count_ == kMaxOperands) {
      decodable_ = false;
      return;
    }
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) {
      const bool segmented =
          op.mem.segment == ZYDIS_REGISTER_FS || op.mem.segment == ZYDIS_REGISTER_GS;
      if (segmented || op.mem.type != ZYDIS_MEMOP_TYPE_MEM) decodable_ = false;
    }
    operands_[count_++] = &op;
  }
  if (mask_register_ != 0) mask_ = registers.opmask(mask_register_);
}

bool Operation::is_vector_register(unsigned i) const {
  if (operand(i).type != ZYDIS_OPERAND_TYPE_REGISTER) return false;
  const ZydisRegisterClass c = ZydisRegisterGetClass(operand(i).reg.value);
  return c == ZYDIS_REGCLASS_XMM || c == ZYDIS_REGCLASS_YMM || c == ZYDIS_REGCLASS_ZMM;
}

bool Operation::is_gpr(unsigned i) const {
  if (operand(i).type != ZYDIS_OPERAND_TYPE_REGISTER) return false;
  const ZydisRegisterClass c = ZydisRegisterGetClass(operand(i).reg.value);
  return c == ZYDIS_REGCLASS_GPR8 || c == ZYDIS_REGCLASS_GPR16 || c == ZYDIS_REGCLASS_GPR32 ||
         c == ZYDIS_REGCLASS_GPR64;
}

bool Operation::is_opmask_register(unsigned i) const {
  return operand(i).type == ZYDIS_OPERAND_TYPE_REGISTER &&
         ZydisRegisterGetClass(operand(i).reg.value) == ZYDIS_REGCLASS_MASK;
}

unsigned Operation::register_index(unsigned i) const {
  return static_cast<unsigned>(ZydisRegisterGetId(operand(i).reg.value));
}

unsigned Operation::element_bytes(unsigned i) const {
  const unsigned bits = operand(i).element_size;
  return bits >= 8 ? bits / 8 : 1;
}

bool Operation::zeroing() const {
  return instruction_.avx.mask.mode == ZYDIS_MASK_MODE_ZEROING ||
         instruction_.avx.mask.mode == ZYDIS_MASK_MODE_CONTROL_ZEROING;
}

bool Operation::embedded_broadcast() const {
  return instruction_.avx.broadcast.mode != ZYDIS_BROADCAST_MODE_INVALID &&
         !instruction_.avx.broadcast.is_static;
}

std::uint64_t Operation::base_plus_displacement(unsigned i) const {
  const ZydisDecodedOperandMem& mem = operand(i).mem;
  std::uint64_t address = static_cast<std::uint64_t>(mem.disp.value);
  if (mem.base == ZYDIS_REGISTER_RIP || mem.base == ZYDIS_REGISTER_EIP) {
    address += registers_.rip() + instruction_.length;
  } else if (mem.base != ZYDIS_REGISTER_NONE) {
    address += registers_.gpr(mem.base);
  }
  return address;
}

std::uint64_t Operation::scaled_index(unsigned i) const {
  const ZydisDecodedOperandMem& mem = operand(i).mem;
  if (mem.index == ZYDIS_REGISTER_NONE) return 0;
  return registers_.gpr(mem.index) * mem.scale;
}

std::uint64_t Operation::address(unsigned i) const {
  const std::uint64_t address = base_plus_displacement(i) + scaled_index(i);
  return instruction_.address_width == 32 ? address & 0xFFFFFFFFu : address;
}

Vec Operation::source(unsigned i) const {
  Vec v = zero_vector();
  const ZydisDecodedOperand& op = operand(i);
  if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
    if (is_vector_register(i)) return registers_.vector(register_index(i));
    if (is_opmask_register(i)) {
      v.set<std::uint64_t>(0, registers_.opmask(register_index(i)));
    } else {
      v.set<std::uint64_t>(0, registers_.gpr(op.reg.value));
    }
    return v;
  }
  if (op.type != ZYDIS_OPERAND_TYPE_MEMORY) return v;
  const std::uint64_t at = address(i);
  if (embedded_broadcast()) {
    const unsigned element = bytes(i);
    if (mask_ == 0) return v;
    read_memory(at, v.bytes, element);
    for (unsigned offset = element; offset < vector_bytes(); offset += element)
      std::memcpy(v.bytes + offset, v.bytes, element);
    return v;
  }
  read_memory(at, v.bytes, bytes(i));
  return v;
}

Vec Operation::source_masked(unsigned i) const {
  const unsigned element = element_bytes(i);
  const bool per_element = masked() && is_memory(i) && !embedded_broadcast() &&
                           element == element_bytes(0) && bytes(i) == bytes(0);
  if (!per_element) return source(i);
  Vec v = zero_vector();
  const std::uint64_t at = address(i);
  for (unsigned e = 0; e * element < bytes(i); ++e)
    if (selected(e)) read_memory(at + e * element, v.bytes + e * element, element);
  return v;
}

std::uint8_t Operation::immediate() const {
  for (unsigned i = count_; i-- > 0;)
    if (is_immediate(i)) return static_cast<std::uint8_t>(operand(i).imm.value.u);
  return 0;
}

void Operation::write_destination_unmasked(const Vec& result, unsigned result_bytes) {
  const ZydisDecodedOperand& op = operand(0);
  if (op.type == ZYDIS_OPERAND_TYPE_MEMORY) {
    write_memory(address(0), result.bytes, result_bytes);
  } else if (is_vector_register(0)) {
    registers_.set_vector(register_index(0), result, result_bytes);
  } else if (is_opmask_register(0)) {
    registers_.set_opmask(register_index(0), result.get<std::uint64_t>(0));
  } else if (is_gpr(0)) {
    registers_.set_gpr(op.reg.value, result.get<std::uint64_t>(0));
  }
}

void Operation::write_destination(const Vec& result, unsigned result_bytes) {
  if (!masked()) {
    write_destination_unmasked(result, result_bytes);
    return;
  }
  const unsigned element = element_bytes(0);
  const unsigned count = result_bytes / element;
  if (is_memory(0)) {
    const std::uint64_t at = address(0);
    for (unsigned e = 0; e < count; ++e)
      if (selected(e)) write_memory(at + e * element, result.bytes + e * element, element);
    return;
  }
  Vec merged = zeroing() ? zero_vector() : source(0);
  for (unsigned e = 0; e < count; ++e)
    if (selected(e)) std::memcpy(merged.bytes + e * element, result.bytes + e * element, element);
  write_destination_unmasked(merged, result_bytes);
}

unsigned Operation::rounding_control() const {
  switch (instruction_.avx.rounding.mode) {
    case ZYDIS_ROUNDING_MODE_RN:
      return kRoundNearest;
    case ZYDIS_ROUNDING_MODE_RD:
      return kRoundDown;
    case ZYDIS_ROUNDING_MODE_RU:
      return kRoundUp;
    case ZYDIS_ROUNDING_MODE_RZ:
      return kRoundZero;
    default:
      return (registers_.mxcsr() & kMxcsrRounding) >> kMxcsrRoundingShift;
  }
}

}  // namespace qforge::emulate
