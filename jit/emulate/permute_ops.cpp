// EVEX data rearrangement: byte shuffles, permutes (one and two tables), unpacks, dword
// and 128-bit block shuffles, packs with saturation, and widening / narrowing moves.
//
// "Lane" below is a 128-bit block: vpshufb, vpunpck*, vpshufd and vpack* work inside
// each lane independently, as their SSE ancestors did on the whole xmm.
//
// Tables and the sources of unpacks and block shuffles feed other element positions than
// their own, so they are read whole (source), never element-masked (source_masked).
#include <cstdint>
#include <cstring>

#include "jit/emulate/elementwise.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

using std::int16_t, std::int32_t, std::int64_t, std::int8_t;
using std::uint16_t, std::uint32_t, std::uint64_t, std::uint8_t;

constexpr unsigned kLaneBytes = 16;

// vpshufb: byte i = bit 7 of control i ? 0 : byte (control i & 15) of the same lane.
Status shuffle_bytes(Operation& op) {
  const Vec a = op.source(1), control = op.source_masked(2);
  Vec r = zero_vector();
  for (unsigned i = 0; i < op.vector_bytes(); ++i) {
    const uint8_t c = control.bytes[i];
    const unsigned lane = i & ~(kLaneBytes - 1);
    r.bytes[i] = (c & 0x80) ? 0 : a.bytes[lane + (c & 15)];
  }
  op.write_destination(r);
  return Status::kDone;
}

// vpermd/vpermps: element i = table[index[i] mod n]; index in src1, table in src2.
template <typename T>
Status permute(Operation& op) {
  const Vec index = op.source(1), table = op.source(2);
  const unsigned n = op.vector_bytes() / sizeof(T);
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i) r.set<T>(i, table.get<T>(index.get<T>(i) & (n - 1)));
  op.write_destination(r);
  return Status::kDone;
}

// Two-table permutes over tables {first, second} (2n elements): index bit log2(n) picks
// the table, the bits below it the element.
template <typename T>
T pick_from_two(const Vec& first, const Vec& second, uint64_t index, unsigned n) {
  const unsigned element = static_cast<unsigned>(index & (n - 1));
  return (index & n) ? second.get<T>(element) : first.get<T>(element);
}

// vpermt2*: dest = first table (and merge source), src1 = indices, src2 = second table.
template <typename T>
Status permute_two_tables_overwrite_table(Operation& op) {
  const Vec first = op.source(0), index = op.source(1), second = op.source(2);
  const unsigned n = op.vector_bytes() / sizeof(T);
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i)
    r.set<T>(i, pick_from_two<T>(first, second, static_cast<Unsigned<T>>(index.get<T>(i)), n));
  op.write_destination(r);
  return Status::kDone;
}

// vpermi2*: dest = indices (and merge source), src1 = first table, src2 = second table.
template <typename T>
Status permute_two_tables_overwrite_index(Operation& op) {
  const Vec index = op.source(0), first = op.source(1), second = op.source(2);
  const unsigned n = op.vector_bytes() / sizeof(T);
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i)
    r.set<T>(i, pick_from_two<T>(first, second, static_cast<Unsigned<T>>(index.get<T>(i)), n));
  op.write_destination(r);
  return Status::kDone;
}

// vpunpckl*/vpunpckh*: interleave the low (or high) halves of each lane of src1 and src2:
// lane = a[h], b[h], a[h+1], b[h+1], ... with h = 0 (low) or half a lane (high).
template <typename T, bool kHigh>
Status unpack(Operation& op) {
  const Vec a = op.source(1), b = op.source(2);
  constexpr unsigned kPerLane = kLaneBytes / sizeof(T), kHalf = kPerLane / 2;
  Vec r = zero_vector();
  for (unsigned lane = 0; lane < op.vector_bytes() / kLaneBytes; ++lane) {
    const unsigned base = lane * kPerLane;
    for (unsigned j = 0; j < kHalf; ++j) {
      const unsigned from = base + (kHigh ? kHalf : 0) + j;
      r.set<T>(base + 2 * j, a.get<T>(from));
      r.set<T>(base + 2 * j + 1, b.get<T>(from));
    }
  }
  op.write_destination(r);
  return Status::kDone;
}

// vpshufd: dword j of each lane = dword imm8[2j+1:2j] of the same lane.
Status shuffle_dwords(Operation& op) {
  const Vec a = op.source(1);
  const uint8_t imm = op.immediate();
  Vec r = zero_vector();
  for (unsigned i = 0; i < op.vector_bytes() / 4; ++i) {
    const unsigned lane_base = i & ~3u;
    r.set<uint32_t>(i, a.get<uint32_t>(lane_base + ((imm >> (2 * (i & 3))) & 3)));
  }
  op.write_destination(r);
  return Status::kDone;
}

// vshufi32x4 & co.: destination lanes from src1 (lower half) and src2 (upper half),
// chosen by imm8 fields of 2 bits (zmm: 4 lanes) or 1 bit (ymm: 2 lanes).
Status shuffle_lanes(Operation& op) {
  const Vec a = op.source(1), b = op.source(2);
  const uint8_t imm = op.immediate();
  const unsigned lanes = op.vector_bytes() / kLaneBytes;
  if (lanes < 2) return Status::kUnsupported;
  const unsigned field_bits = lanes == 4 ? 2 : 1;
  Vec r = zero_vector();
  for (unsigned lane = 0; lane < lanes; ++lane) {
    const unsigned pick = (imm >> (field_bits * lane)) & ((1u << field_bits) - 1);
    const Vec& from = lane < lanes / 2 ? a : b;
    std::memcpy(r.bytes + lane * kLaneBytes, from.bytes + pick * kLaneBytes, kLaneBytes);
  }
  op.write_destination(r);
  return Status::kDone;
}

// vpack*: each lane = saturate(src1 lane elements), saturate(src2 lane elements).
template <typename From, typename To>
Status pack(Operation& op) {
  const Vec a = op.source(1), b = op.source(2);
  constexpr unsigned kPerLane = kLaneBytes / sizeof(From);
  Vec r = zero_vector();
  for (unsigned lane = 0; lane < op.vector_bytes() / kLaneBytes; ++lane) {
    for (unsigned j = 0; j < kPerLane; ++j) {
      const unsigned from = lane * kPerLane + j, to = lane * 2 * kPerLane + j;
      r.set<To>(to, saturate<To>(a.get<From>(from)));
      r.set<To>(to + kPerLane, saturate<To>(b.get<From>(from)));
    }
  }
  op.write_destination(r);
  return Status::kDone;
}

// vpmovzx*/vpmovsx*: element i = extend(source element i); From's signedness decides.
template <typename From, typename To>
Status widen(Operation& op) {
  const Vec a = op.source(1);
  const unsigned n = op.vector_bytes() / sizeof(To);
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i) r.set<To>(i, static_cast<To>(a.get<From>(i)));
  op.write_destination(r);
  return Status::kDone;
}

enum class Narrowing { kTruncate, kSigned, kUnsigned };

// vpmov{,s,us}*: element i = narrow(source element i); the result fills vector_bytes() *
// sizeof(To) / sizeof(From) bytes of the destination, the rest of a register is zeroed.
template <typename From, typename To, Narrowing kHow>
Status narrow(Operation& op) {
  const Vec a = op.source(1);
  const unsigned n = op.vector_bytes() / sizeof(From);
  Vec r = zero_vector();
  for (unsigned i = 0; i < n; ++i) {
    const From x = a.get<From>(i);
    To y;
    if (kHow == Narrowing::kTruncate) {
      y = static_cast<To>(x);
    } else if (kHow == Narrowing::kSigned) {
      y = static_cast<To>(saturate<Signed<To>>(static_cast<Signed<From>>(x)));
    } else {
      y = saturate_unsigned<To>(static_cast<Unsigned<From>>(x));
    }
    r.set<To>(i, y);
  }
  op.write_destination(r, n * sizeof(To));
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_VPSHUFB, shuffle_bytes},
    {ZYDIS_MNEMONIC_VPERMD, permute<uint32_t>},
    {ZYDIS_MNEMONIC_VPERMPS, permute<uint32_t>},
    {ZYDIS_MNEMONIC_VPERMW, permute<uint16_t>},
    {ZYDIS_MNEMONIC_VPERMT2W, permute_two_tables_overwrite_table<uint16_t>},
    {ZYDIS_MNEMONIC_VPERMT2D, permute_two_tables_overwrite_table<uint32_t>},
    {ZYDIS_MNEMONIC_VPERMT2PS, permute_two_tables_overwrite_table<uint32_t>},
    {ZYDIS_MNEMONIC_VPERMT2Q, permute_two_tables_overwrite_table<uint64_t>},
    {ZYDIS_MNEMONIC_VPERMT2PD, permute_two_tables_overwrite_table<uint64_t>},
    {ZYDIS_MNEMONIC_VPERMI2D, permute_two_tables_overwrite_index<uint32_t>},
    {ZYDIS_MNEMONIC_VPERMI2PS, permute_two_tables_overwrite_index<uint32_t>},
    {ZYDIS_MNEMONIC_VPUNPCKLBW, unpack<uint8_t, false>},
    {ZYDIS_MNEMONIC_VPUNPCKHBW, unpack<uint8_t, true>},
    {ZYDIS_MNEMONIC_VPUNPCKLWD, unpack<uint16_t, false>},
    {ZYDIS_MNEMONIC_VPUNPCKHWD, unpack<uint16_t, true>},
    {ZYDIS_MNEMONIC_VPUNPCKLDQ, unpack<uint32_t, false>},
    {ZYDIS_MNEMONIC_VPUNPCKHDQ, unpack<uint32_t, true>},
    {ZYDIS_MNEMONIC_VPUNPCKLQDQ, unpack<uint64_t, false>},
    {ZYDIS_MNEMONIC_VPUNPCKHQDQ, unpack<uint64_t, true>},
    {ZYDIS_MNEMONIC_VPSHUFD, shuffle_dwords},
    {ZYDIS_MNEMONIC_VSHUFI32X4, shuffle_lanes},
    {ZYDIS_MNEMONIC_VSHUFF32X4, shuffle_lanes},
    {ZYDIS_MNEMONIC_VSHUFI64X2, shuffle_lanes},
    {ZYDIS_MNEMONIC_VSHUFF64X2, shuffle_lanes},
    {ZYDIS_MNEMONIC_VPACKSSDW, pack<int32_t, int16_t>},
    {ZYDIS_MNEMONIC_VPACKUSDW, pack<int32_t, uint16_t>},
    {ZYDIS_MNEMONIC_VPACKSSWB, pack<int16_t, int8_t>},
    {ZYDIS_MNEMONIC_VPACKUSWB, pack<int16_t, uint8_t>},
    {ZYDIS_MNEMONIC_VPMOVZXBW, widen<uint8_t, uint16_t>},
    {ZYDIS_MNEMONIC_VPMOVZXBD, widen<uint8_t, uint32_t>},
    {ZYDIS_MNEMONIC_VPMOVZXBQ, widen<uint8_t, uint64_t>},
    {ZYDIS_MNEMONIC_VPMOVZXWD, widen<uint16_t, uint32_t>},
    {ZYDIS_MNEMONIC_VPMOVZXWQ, widen<uint16_t, uint64_t>},
    {ZYDIS_MNEMONIC_VPMOVZXDQ, widen<uint32_t, uint64_t>},
    {ZYDIS_MNEMONIC_VPMOVSXBW, widen<int8_t, int16_t>},
    {ZYDIS_MNEMONIC_VPMOVSXBD, widen<int8_t, int32_t>},
    {ZYDIS_MNEMONIC_VPMOVSXBQ, widen<int8_t, int64_t>},
    {ZYDIS_MNEMONIC_VPMOVSXWD, widen<int16_t, int32_t>},
    {ZYDIS_MNEMONIC_VPMOVSXWQ, widen<int16_t, int64_t>},
    {ZYDIS_MNEMONIC_VPMOVSXDQ, widen<int32_t, int64_t>},
    {ZYDIS_MNEMONIC_VPMOVWB, narrow<uint16_t, uint8_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVSWB, narrow<uint16_t, uint8_t, Narrowing::kSigned>},
    {ZYDIS_MNEMONIC_VPMOVUSWB, narrow<uint16_t, uint8_t, Narrowing::kUnsigned>},
    {ZYDIS_MNEMONIC_VPMOVDB, narrow<uint32_t, uint8_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVSDB, narrow<uint32_t, uint8_t, Narrowing::kSigned>},
    {ZYDIS_MNEMONIC_VPMOVUSDB, narrow<uint32_t, uint8_t, Narrowing::kUnsigned>},
    {ZYDIS_MNEMONIC_VPMOVDW, narrow<uint32_t, uint16_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVSDW, narrow<uint32_t, uint16_t, Narrowing::kSigned>},
    {ZYDIS_MNEMONIC_VPMOVUSDW, narrow<uint32_t, uint16_t, Narrowing::kUnsigned>},
    {ZYDIS_MNEMONIC_VPMOVQB, narrow<uint64_t, uint8_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVQW, narrow<uint64_t, uint16_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVQD, narrow<uint64_t, uint32_t, Narrowing::kTruncate>},
    {ZYDIS_MNEMONIC_VPMOVSQD, narrow<uint64_t, uint32_t, Narrowing::kSigned>},
    {ZYDIS_MNEMONIC_VPMOVUSQD, narrow<uint64_t, uint32_t, Narrowing::kUnsigned>},
};

}  // namespace

std::span<const OpEntry> permute_ops() {
  return kOps;
}

}  // namespace qforge::emulate
