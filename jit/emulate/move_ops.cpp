// EVEX data movement: full-vector moves, vmovd/vmovq, broadcasts, 128/256-bit extract and
// insert. Masked loads read only the selected elements (fault suppression, see
// Operation::source_masked); masked stores write only the selected elements.
#include <cstdint>
#include <cstring>

#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

// vmovups/vmovdqu*: load, store or register copy of a whole vector under the opmask.
// The aligned forms fault (#GP) on a memory operand not aligned to the vector length.
template <bool kAligned>
Status move_vector(Operation& op) {
  if (kAligned) {
    for (unsigned i = 0; i < 2; ++i)
      if (op.is_memory(i) && op.address(i) % op.vector_bytes() != 0) return Status::kInvalid;
  }
  op.write_destination(op.source_masked(1));
  return Status::kDone;
}

// vmovd / vmovq: 4 or 8 bytes between an xmm and a GPR or memory; an xmm destination is
// zeroed above them.
template <unsigned kBytes>
Status move_scalar(Operation& op) {
  const Vec source = op.source(1);
  Vec result = zero_vector();
  std::memcpy(result.bytes, source.bytes, kBytes);
  op.write_destination_unmasked(result);
  return Status::kDone;
}

// vpbroadcast*, vbroadcastss/sd: element 0 of an xmm, GPR or memory to every element.
// vbroadcast[if]32x4 & co.: a 128/256-bit memory block to every block.
Status broadcast(Operation& op) {
  const unsigned chunk = op.is_memory(1) ? op.bytes(1) : op.element_bytes(0);
  const Vec source = op.source(1);
  Vec result;
  for (unsigned offset = 0; offset < kVectorBytes; offset += chunk)
    std::memcpy(result.bytes + offset, source.bytes, chunk);
  op.write_destination(result);
  return Status::kDone;
}

// vextract*: block imm8 (modulo the number of blocks) of the source to the destination.
Status extract(Operation& op) {
  const unsigned chunk = op.bytes(0);
  const unsigned block = op.immediate() & (op.vector_bytes() / chunk - 1);
  const Vec source = op.source(1);
  Vec result = zero_vector();
  std::memcpy(result.bytes, source.bytes + block * chunk, chunk);
  op.write_destination(result);
  return Status::kDone;
}

// vinsert*: src1 with block imm8 replaced by src2.
Status insert(Operation& op) {
  const unsigned chunk = op.bytes(2);
  const unsigned block = op.immediate() & (op.vector_bytes() / chunk - 1);
  Vec result = op.source(1);
  const Vec inserted = op.source(2);
  std::memcpy(result.bytes + block * chunk, inserted.bytes, chunk);
  op.write_destination(result);
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VMOVUPS, move_vector<false>},   {ZYDIS_MNEMONIC_VMOVUPD, move_vector<false>},
    {ZYDIS_MNEMONIC_VMOVAPS, move_vector<true>},    {ZYDIS_MNEMONIC_VMOVAPD, move_vector<true>},
    {ZYDIS_MNEMONIC_VMOVDQU8, move_vector<false>},  {ZYDIS_MNEMONIC_VMOVDQU16, move_vector<false>},
    {ZYDIS_MNEMONIC_VMOVDQU32, move_vector<false>}, {ZYDIS_MNEMONIC_VMOVDQU64, move_vector<false>},
    {ZYDIS_MNEMONIC_VMOVDQA32, move_vector<true>},  {ZYDIS_MNEMONIC_VMOVDQA64, move_vector<true>},
    {ZYDIS_MNEMONIC_VMOVD, move_scalar<4>},         {ZYDIS_MNEMONIC_VMOVQ, move_scalar<8>},
    {ZYDIS_MNEMONIC_VPBROADCASTB, broadcast},       {ZYDIS_MNEMONIC_VPBROADCASTW, broadcast},
    {ZYDIS_MNEMONIC_VPBROADCASTD, broadcast},       {ZYDIS_MNEMONIC_VPBROADCASTQ, broadcast},
    {ZYDIS_MNEMONIC_VBROADCASTSS, broadcast},       {ZYDIS_MNEMONIC_VBROADCASTSD, broadcast},
    {ZYDIS_MNEMONIC_VBROADCASTI32X4, broadcast},    {ZYDIS_MNEMONIC_VBROADCASTF32X4, broadcast},
    {ZYDIS_MNEMONIC_VBROADCASTI32X8, broadcast},    {ZYDIS_MNEMONIC_VBROADCASTF32X8, broadcast},
    {ZYDIS_MNEMONIC_VBROADCASTI64X4, broadcast},    {ZYDIS_MNEMONIC_VBROADCASTF64X4, broadcast},
    {ZYDIS_MNEMONIC_VEXTRACTI32X4, extract},        {ZYDIS_MNEMONIC_VEXTRACTF32X4, extract},
    {ZYDIS_MNEMONIC_VEXTRACTI32X8, extract},        {ZYDIS_MNEMONIC_VEXTRACTF32X8, extract},
    {ZYDIS_MNEMONIC_VEXTRACTI64X4, extract},        {ZYDIS_MNEMONIC_VEXTRACTF64X4, extract},
    {ZYDIS_MNEMONIC_VINSERTI32X4, insert},          {ZYDIS_MNEMONIC_VINSERTF32X4, insert},
    {ZYDIS_MNEMONIC_VINSERTI32X8, insert},          {ZYDIS_MNEMONIC_VINSERTF32X8, insert},
    {ZYDIS_MNEMONIC_VINSERTI64X4, insert},          {ZYDIS_MNEMONIC_VINSERTF64X4, insert},
};

}  // namespace

std::span<const OpEntry> move_ops() {
  return kOps;
}

}  // namespace qforge::emulate
