#include "jit/gemm/gemm_generator.h"

#include <algorithm>
#include <cstddef>

#include "jit/base/aligned_buffer.h"
#include "jit/base/error.h"

namespace qforge {

using namespace Xbyak;
using namespace Xbyak::util;

namespace {

constexpr std::size_t kMaxCodeBytes = 1 << 20;
constexpr int kPanelRowBytes = 64;

}  // namespace

GemmGenerator::GemmGenerator(const GemmKey& key)
    : GemmGenerator(key, kMaxCodeBytes, GeometryOnly{}) {
  QF_REQUIRE(key.isa == Isa::avx2 || key.isa == Isa::avx_vnni || key.isa == Isa::avx512_vnni,
             "gemm generator: ISA ", isa_name(key.isa), " is not served by this generator");
  QF_REQUIRE(fits(key, key.blocking), "gemm generator: blocking ", key.blocking.mr, "x",
             key.blocking.nr, " does not fit the register file for ", kernel_name(key));
  if (!zmm_ && key.isa == Isa::avx_vnni) setDefaultEncoding(VexEncoding);

  const int spill_bytes =
      plan_.float_sums_in_memory ? key.blocking.mr * max_per_row_ * vector_bytes_ : 0;
  StackFrame frame(this, 1, 12, spill_bytes, /*makeEpilog=*/false);
  bind_frame_registers(frame);
  super_ = frame.t[10];
  handoff_ = frame.t[11];
  handoff_on_ = key.blocking.prefetch_distance > 0;

  emit_unit_loop();
  vzeroupper();
  frame.close();
  emit_constants();
  kernel_ = reinterpret_cast<GemmKernelFn>(const_cast<std::uint8_t*>(finalize()));
}

GemmGenerator::GemmGenerator(const GemmKey& key, std::size_t max_code_bytes, GeometryOnly)
    : JitGenerator(max_code_bytes), key_(key), isa_(vector_isa_of(key.isa)) {
  QF_REQUIRE(key.bits == 8 || key.bits == 5 || key.bits == 4,
             "gemm generator: bits must be 8, 5 or 4");
  QF_REQUIRE(key.k_padded % key.group == 0 && key.group % (key.bits == 8   ? 4
                                                           : key.bits == 5 ? kFifthBitK
                                                                           : 8) ==
                                                  0,
             "gemm generator: inconsistent K/group in ", kernel_name(key));
  QF_REQUIRE(!(key.epilogue.bias && key.epilogue.swiglu), "gemm generator: bias with swiglu");
  woq_ = key.weight_only();
  bf16_ = key.activation == ActivationKind::bf16;
  QF_REQUIRE(!(woq_ && key.bits == 5),
             "gemm generator: weight-only kernels read int8 and int4 weights, not ",
             kernel_name(key));
  QF_REQUIRE(!(woq_ && key.epilogue.output == OutputKind::group_sums),
             "gemm generator: a weight-only kernel has no integer group sums");
  split_ = key.split_digits();
  QF_REQUIRE(!(split_ && key.epilogue.output == OutputKind::group_sums),
             "gemm generator: split activations sum their digit rows; no integer group sums in ",
             kernel_name(key));
  plan_ = plan_registers(key, key.blocking);
  zmm_ = isa_.vector_bytes == 64;
  QF_REQUIRE(!bf16_ || (zmm_ && key.bits == 4),
             "gemm generator: bf16 activations are for int4 weights on zmm (vdpbf16ps), not ",
             kernel_name(key));
  vector_bytes_ = isa_.vector_bytes;
  vectors_per_panel_ = isa_.vectors_per_panel();
  slice_vectors_ = slice_vectors(key);
  panels_per_unit_ = key.panels_per_unit();
  groups_ = key.groups();
  k_per_row_ = key.bits == 8 ? 4 : 8;
  // The K loop's step: a packed row, or (int5) a chunk of 4 nibble rows and a bit row.
  k_per_step_ = key.bits == 5 ? kFifthBitK : k_per_row_;
  step_bytes_ = k_per_step_ * 2 * key.bits;  // 16 columns x bits / 8 bytes a k
  steps_per_group_ = key.group / k_per_step_;
  group_data_bytes_ = key.group * 2 * key.bits;
  // f16 scales (+ f16 offsets), or s8 sub-scales (+ sub-offsets): packed_layout.h
  superblock_groups_ = key.superblock_groups;
  trailer_bytes_ = superblock_groups_ ? 32 : key.asymmetric ? 64 : 32;
  super_header_bytes_ = superblock_groups_ ? (key.asymmetric ? 64 : 32) : 0;
  panel_bytes_ = (group_data_bytes_ + trailer_bytes_) * groups_ +
                 (superblock_groups_ ? groups_ / superblock_groups_ * super_header_bytes_ : 0);
  QF_REQUIRE(superblock_groups_ == 0 || (groups_ % superblock_groups_ == 0 &&
                                         (superblock_groups_ & (superblock_groups_ - 1)) == 0 &&
                                         (key.bits != 8 || !key.asymmetric)),
             "gemm generator: two-level scales are for whole super-blocks of a power-of-two "
             "number of groups (int8 symmetric, int5 or int4), not ",
             kernel_name(key));
  // Bytes between activation rows: s8 xq (activation.h), f32 or bf16 (float_activations.h).
  a_element_bytes_ = bf16_ ? 2 : (woq_ ? 4 : 1);
  a_stride_ = static_cast<std::int64_t>(round_up(key.k_padded * a_element_bytes_, kCacheLine));
  n_padded_ = key.units() * 16 * panels_per_unit_;
  max_per_row_ = per_row(key.blocking.nr);
  panel_sequential_ = panels_per_unit_ == 2 && key.blocking.nr == 1 &&
                      key.bucket != MBucket::large && slice_vectors_ == vectors_per_panel_ &&
                      key.epilogue.output != OutputKind::group_sums;
  // One accumulator per pass: the tile's only vector, or the only vector of each pass.
  const int pass_vectors = panel_sequential_ ? slice_vectors_ : max_per_row_;
  split_chain_ = key.isa == Isa::avx512_vnni && !woq_ && key.bits != 8 && key.blocking.mr == 1 &&
                 pass_vectors == 1;
  QF_REQUIRE(!split_chain_ || plan_.total() < isa_.registers / 2,
             "gemm generator: acc_high() overlaps the register plan of ", kernel_name(key));
  QF_REQUIRE(!key.woq_chains || (woq_ && zmm_ && key.blocking.mr == 1),
             "gemm generator: accumulator chains are for weight-only zmm GEMVs, not ",
             kernel_name(key));
  woq_chains_ = key.woq_chains ? kWoqChains : 1;
}

// ---- register roles ---------------------------------------------------------------

GemmGenerator::Xmm GemmGenerator::vec(int index) const {
  if (zmm_) return Zmm(index);
  return Ymm(index);
}

GemmGenerator::Xmm GemmGenerator::acc(int row, int t) const {
  return vec(isa_.registers - 1 - (row * tile_per_row_ + t));
}

GemmGenerator::Xmm GemmGenerator::fsum(int row, int t) const {
  return vec(isa_.registers - 1 - tile_rows_ * tile_per_row_ - (row * tile_per_row_ + t));
}

GemmGenerator::Xmm GemmGenerator::woq_chain(int t, int c) const {
  if (c == 0) return acc(0, t);
  const int block = tile_rows_ * tile_per_row_;
  const int float_sums = plan_.float_sums > 0 ? block : 0;
  return vec(isa_.registers - 1 - block - float_sums - (c - 1) * tile_per_row_ - t);
}

Address GemmGenerator::fsum_spill(int row, int t) const {
  const int offset = spill_displacement_ + (row * max_per_row_ + t) * vector_bytes_;
  return zmm_ ? zword[spill_base_ + offset] : yword[spill_base_ + offset];
}

GemmGenerator::Xmm GemmGenerator::weight(int t, bool high) const {
  const bool two = key_.bits != 8 || !isa_.vnni;
  return vec(two ? 2 * t + (high ? 1 : 0) : t);
}

GemmGenerator::Xmm GemmGenerator::abs_weight(int t) const {
  return vec(2 * t + 1);
}

GemmGenerator::Xmm GemmGenerator::broadcast() const {
  return vec(plan_.weights);
}
GemmGenerator::Xmm GemmGenerator::nibble_mask() const {
  return vec(plan_.weights + 1);
}
GemmGenerator::Xmm GemmGenerator::dot_temp() const {
  return vec(plan_.weights + 1 + (key_.bits != 8 ? 1 : 0));
}
GemmGenerator::Xmm GemmGenerator::epilogue_temp(int i) const {
  return vec(i);
}

Address GemmGenerator::constant(int index) const {
  const int offset = index * vector_bytes_;
  return zmm_ ? zword[rip + constants_ + offset] : yword[rip + constants_ + offset];
}

Address GemmGenerator::vector_at(const Reg64& base, std::int64_t offset) const {
  return zmm_ ? zword[base + offset] : yword[base + offset];
}

Address GemmGenerator::bcast_at(const Reg64& base, std::int64_t offset) const {
  return dword[base + offset];
}

void GemmGenerator::zero(const Xmm& x) {
  if (zmm_)
    vpxord(x, x, x);
  else
    vpxor(x, x, x);
}

// ---- loops ------------------------------------------------------------------------

void GemmGenerator::bind_frame_registers(const Xbyak::util::StackFrame& frame) {
  args_ = frame.p[0];
  unit_ = frame.t[0];
  row_ = frame.t[1];
  bk_ = frame.t[2];
  ak_ = frame.t[3];
  kloop_ = frame.t[4];
  gloop_ = frame.t[5];
  sums_ = frame.t[6];
  tmp_ = frame.t[7];
  tmp2_ = frame.t[8];
  out_ = frame.t[9];
}

void GemmGenerator::emit_unit_loop() {
  const int nr = key_.blocking.nr;
  Label loop, tail, done;
  mov(unit_, ptr[args_ + offsetof(GemmCallArgs, unit_begin)]);
  L(loop);
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, unit_end)]);
  sub(tmp_, unit_);
  jle(done, T_NEAR);
  cmp(tmp_, nr);
  jl(tail, T_NEAR);
  emit_row_loop(nr);
  add(unit_, nr);
  jmp(loop, T_NEAR);
  L(tail);
  for (int units = nr - 1; units >= 1; --units) {
    Label next;
    cmp(tmp_, units);
    jne(next, T_NEAR);
    emit_row_loop(units);
    jmp(done, T_NEAR);
    L(next);
  }
  L(done);
}

void GemmGenerator::emit_row_loop(int units) {
  const int mr = key_.blocking.mr;
  Label loop, tail, done;
  xor_(row_, row_);
  L(loop);
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, m)]);
  sub(tmp_, row_);
  jle(done, T_NEAR);
  cmp(tmp_, mr);
  jl(tail, T_NEAR);
  emit_tile(mr, units);
  add(row_, mr);
  jmp(loop, T_NEAR);
  L(tail);
  for (int rows = mr - 1; rows >= 1 && split_ == 0; --rows) {  // a split M is a multiple of D
    Label next;
    cmp(tmp_, rows);
    jne(next, T_NEAR);
    emit_tile(rows, units);
    jmp(done, T_NEAR);
    L(next);
  }
  L(done);
}

void GemmGenerator::emit_tile(int rows, int units) {
  for (slice_first_ = 0; slice_first_ < vectors_per_panel_; slice_first_ += slice_vectors_)
    emit_tile_pass(rows, units);
  slice_first_ = 0;
}

// One pass over the tile's panels (all of each panel, or one column slice of it).
void GemmGenerator::emit_tile_pass(int rows, int units) {
  tile_rows_ = rows;
  tile_per_row_ = per_row(units);
  const int t_count = per_row(units);
  std::string tile = "tile " + std::to_string(rows) + "x" + std::to_string(units) + ": ";
  if (slice_vectors_ < vectors_per_panel_)
    tile = "tile " + std::to_string(rows) + "x" + std::to_string(units) + " columns " +
           std::to_string(slice_first_ * vector_bytes_ / 4) + "-" +
           std::to_string((slice_first_ + slice_vectors_) * vector_bytes_ / 4 - 1) + ": ";

  // Constant registers (the epilogue of the previous tile may have used them as temps).
  if (!woq_ && key_.bits != 8) vmovups(nibble_mask(), constant(kConstNibbleMask));
  emit_stream_pointers();
  if (key_.epilogue.output == OutputKind::group_sums) {
    // out = c + (row * groups * Np + unit * 16 * panels_per_unit) * 4
    imul(out_, row_, static_cast<int>(groups_ * n_padded_ * 4));
    add(out_, ptr[args_ + offsetof(GemmCallArgs, c)]);
    imul(tmp_, unit_, 64 * panels_per_unit_);
    add(out_, tmp_);
  }
  if (groups_ > 1 && key_.epilogue.output != OutputKind::group_sums) {
    for (int r = 0; r < rows; ++r)
      for (int t = 0; t < t_count; ++t) {
        if (plan_.float_sums_in_memory) {
          zero(epilogue_temp(0));
          vmovups(fsum_spill(r, t), epilogue_temp(0));
        } else {
          zero(fsum(r, t));
        }
      }
  }

  if (panel_sequential_) {
    const int panels = units * panels_per_unit_;
    for (pass_panel_ = 0; pass_panel_ < panels; ++pass_panel_) {
      if (pass_panel_ > 0) emit_stream_pointers();  // back to the tile's first k and group
      emit_k_loop(rows, units, tile + "panel " + std::to_string(pass_panel_) + " ");
    }
    pass_panel_ = -1;
  } else {
    emit_k_loop(rows, units, tile);
  }
  if (key_.epilogue.output != OutputKind::group_sums) {
    mark(tile + "epilogue");
    emit_epilogue(rows, units);
  }
}

// Stream pointers: B at this unit block, A at this row block, xsum at this row block (and
// no prefetch handoff yet).
void GemmGenerator::emit_stream_pointers() {
  if (handoff_on_) xor_(handoff_, handoff_);
  imul(bk_, unit_, static_cast<int>(panels_per_unit_ * panel_bytes_));
  add(bk_, ptr[args_ + offsetof(GemmCallArgs, b)]);
  imul(ak_, row_, static_cast<int>(a_stride_));
  add(ak_, ptr[args_ + (bf16_  ? offsetof(GemmCallArgs, a_bf16)
                        : woq_ ? offsetof(GemmCallArgs, a_f32)
                               : offsetof(GemmCallArgs, a))]);
  imul(sums_, row_, static_cast<int>(groups_ * 4));
  add(sums_,
      ptr[args_ + (woq_ ? offsetof(GemmCallArgs, a_f32_sums) : offsetof(GemmCallArgs, a_sums))]);
}

// The group loop over the whole K of the active vectors (active()): each group's K rows,
// then its correction into the float sums.
void GemmGenerator::emit_k_loop(int rows, int units, const std::string& tile) {
  const int t_count = per_row(units);
  mark(tile + "K loop");
  Label group_loop;
  if (superblock_groups_) emit_first_super_header();
  if (groups_ > 1) {
    mov(gloop_, groups_);
    L(group_loop);
  }
  int first_active = -1;
  for (int r = 0; r < rows; ++r)
    for (int t = 0; t < t_count; ++t)
      if (active(t)) {
        zero(acc(r, t));
        if (first_active < 0) first_active = t;
      }
  if (split_chain_) zero(acc_high());
  for (int t = 0; t < t_count; ++t)
    for (int c = 1; c < woq_chains_; ++c)
      if (active(t)) zero(woq_chain(t, c));
  // The bf16 lookup table, per group: the group correction's temps may have used it.
  if (bf16_) vmovups(woq_table(), constant(kConstBf16Nibbles));
  emit_group_k(rows, units);
  if (split_chain_)  // the pass's one vector
    vpaddd(acc(0, first_active), acc(0, first_active), acc_high());
  for (int t = 0; t < t_count; ++t)
    for (int c = 1; c < woq_chains_; ++c)
      if (active(t)) vaddps(acc(0, t), acc(0, t), woq_chain(t, c));
  mark(tile + "group dequant");
  emit_group_correction(rows, units);
  if (groups_ > 1) {
    dec(gloop_);
    if (superblock_groups_)
      emit_next_super_header(group_loop);
    else
      jnz(group_loop, T_NEAR);
  }
}

void GemmGenerator::emit_first_super_header(bool record) {
  if (record && super_slot_ >= 0)
    mov(qword[rsp + super_slot_], bk_);
  else if (record)
    mov(super_, bk_);
  add(bk_, static_cast<int>(super_header_bytes_));
}

// After dec(gloop_): on to group_loop, through the next super-block's header when the
// groups left are a whole number of super-blocks (S is a power of two); out when none.
void GemmGenerator::emit_next_super_header(const Label& group_loop, bool record) {
  Label done;
  jz(done, T_NEAR);
  test(gloop_, static_cast<int>(superblock_groups_ - 1));
  jnz(group_loop, T_NEAR);
  emit_first_super_header(record);
  jmp(group_loop, T_NEAR);
  L(done);
}

void GemmGenerator::emit_group_k(int rows, int units) {
  // k_unroll counts packed rows; an int5 step is four of them (and a bit row).
  const int unroll =
      key_.bits == 5 ? std::max(1, key_.blocking.k_unroll / 4) : key_.blocking.k_unroll;
  // The handoff zone: the rows whose prefetch reaches past the panel's end, the last
  // `distance` bytes of it. `whole` groups at the end lie in it entirely; the group before
  // them from its `partial`-th last loop iteration on.
  const std::int64_t stride = panel_bytes_ / groups_, step_span = unroll * step_bytes_;
  const std::int64_t whole = handoff_on_ ? key_.blocking.prefetch_distance / stride : 0;
  if (whole > 0) emit_stream_handoff(rows, units, whole);
  if (steps_per_group_ <= unroll) {
    emit_k_rows(rows, units, static_cast<int>(steps_per_group_));
    return;
  }
  const std::int64_t iterations = steps_per_group_ / unroll;
  const int remainder = static_cast<int>(steps_per_group_ % unroll);
  std::int64_t partial = 0;
  if (handoff_on_ && whole < groups_) {
    const std::int64_t before = (whole + 1) * stride - key_.blocking.prefetch_distance;
    partial = std::max<std::int64_t>(0, iterations - (before + step_span - 1) / step_span);
  }
  auto loop = [&](std::int64_t count) {
    if (count == 1) {
      emit_k_rows(rows, units, unroll);
      return;
    }
    Label top;
    mov(kloop_, count);
    L(top);
    emit_k_rows(rows, units, unroll);
    dec(kloop_);
    jnz(top, T_NEAR);
  };
  if (iterations > partial) loop(iterations - partial);
  if (partial > 0) {
    emit_stream_handoff(rows, units, whole + 1);
    loop(partial);
  }
  if (remainder) emit_k_rows(rows, units, remainder);
}

// handoff_ = (P - 1) x panel bytes when this group is one of the tile's last
// `last_groups`, the tile is the last row block and another unit block of this call
// follows; else unchanged (0 from the tile's start).
void GemmGenerator::emit_stream_handoff(int rows, int units, std::int64_t last_groups) {
  if (!handoff_on_ || slice_first_ + slice_vectors_ < vectors_per_panel_) return;
  Label skip;
  if (groups_ > last_groups) {
    cmp(gloop_, static_cast<int>(last_groups));
    ja(skip, T_NEAR);
  }
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, m)]);
  sub(tmp_, row_);
  cmp(tmp_, rows);
  jg(skip, T_NEAR);
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, unit_end)]);
  sub(tmp_, unit_);
  cmp(tmp_, units);
  jle(skip, T_NEAR);
  mov(handoff_, (units * panels_per_unit_ - 1) * panel_bytes_);
  L(skip);
}

// The prefetch of the panel stream whose current row is at [bk_ + at] (none at distance 0).
void GemmGenerator::emit_panel_prefetch(std::int64_t at) {
  const std::int64_t disp = at + key_.blocking.prefetch_distance;
  if (handoff_on_)
    prefetcht0(ptr[bk_ + handoff_ + disp]);
  else if (key_.blocking.prefetch_distance > 0)
    prefetcht0(ptr[bk_ + disp]);
}

void GemmGenerator::emit_k_rows(int rows, int units, int count) {
  for (int i = 0; i < count; ++i) {
    if (key_.bits == 5) {  // chunk i: nibble rows 0..3, then their fifth bits
      const int chunk = i * static_cast<int>(step_bytes_);
      for (int r = 0; r < 4; ++r)
        emit_packed_row(rows, units, i * kFifthBitK + 8 * r, chunk + r * kPanelRowBytes,
                        chunk + 4 * kPanelRowBytes + 16 * r);
    } else if (bf16_)
      emit_woq_bf16_packed_row(rows, units, static_cast<int>(i * k_per_row_), i * kPanelRowBytes);
    else if (woq_)
      emit_woq_packed_row(rows, units, static_cast<int>(i * k_per_row_), i * kPanelRowBytes);
    else
      emit_packed_row(rows, units, static_cast<int>(i * k_per_row_), i * kPanelRowBytes);
  }
  add(ak_, static_cast<int>(count * k_per_step_ * a_element_bytes_));
  add(bk_, static_cast<int>(count * step_bytes_));
}

// One 64-byte row of every panel in the tile: 16 columns x 4 k (int8) or x 8 k (int4; int5
// with the fifth bits of its two nibble halves at disp_bits: qwords, zmm, or two dwords each,
// one per ymm half, packed_layout.h).
void GemmGenerator::emit_packed_row(int rows, int units, int disp_a, int disp_b, int disp_bits) {
  const int panels = units * panels_per_unit_;
  for (int pp = 0; pp < panels; ++pp) {
    if (!panel_active(pp)) continue;
    const std::int64_t base = pp * panel_bytes_ + disp_b;
    emit_panel_prefetch(base);
    for (int s = 0; s < slice_vectors_; ++s) {
      const int t = pp * slice_vectors_ + s;
      const Address at = vector_at(bk_, base + vector_of(t) * vector_bytes_);
      if (key_.bits == 8) {
        if (zmm_) {
          vmovdqu32(weight(t, false), at);
        } else if (isa_.vnni) {
          vmovdqu(weight(t, false), at);
        } else {
          vmovdqu(weight(t, false), at);
          vpxor(weight(t, false), weight(t, false), constant(kConstByteSign));  // v = w_u8 - 128
        }
        if (!isa_.vnni) vpabsb(abs_weight(t), weight(t, false));
      } else {
        // low nibbles = first quad, high nibbles = second quad
        if (zmm_) {
          vmovdqu32(weight(t, true), at);
          vpandd(weight(t, false), weight(t, true), nibble_mask());
          vpsrlw(weight(t, true), weight(t, true), 4);
          vpandd(weight(t, true), weight(t, true), nibble_mask());
        } else {
          vmovdqu(weight(t, true), at);
          vpand(weight(t, false), weight(t, true), nibble_mask());
          vpsrlw(weight(t, true), weight(t, true), 4);
          vpand(weight(t, true), weight(t, true), nibble_mask());
        }
        if (disp_bits >= 0)
          for (int h = 0; h < 2; ++h)
            emit_fifth_bits(weight(t, h == 1),
                            pp * panel_bytes_ + disp_bits + 8 * h + vector_of(t) * 4);
      }
    }
  }
  const int t_count = per_row(units);
  const int quads = key_.bits == 8 ? 1 : 2;
  for (int r = 0; r < rows; ++r)
    for (int quad = 0; quad < quads; ++quad) {
      vpbroadcastd(broadcast(), bcast_at(ak_, r * a_stride_ + disp_a + 4 * quad));
      for (int t = 0; t < t_count; ++t)
        if (active(t))
          emit_dot(split_chain_ && quad == 1 ? acc_high() : acc(r, t), broadcast(), t, quad == 1);
    }
}

// operand |= 16 where the bit plane at [bk_ + at] says so: zmm, a kmovq of the 64 bits and
// a masked add (the nibble is below 16); ymm, the 32 bits spread over the bytes (the
// broadcast register is free while the weights load).
void GemmGenerator::emit_fifth_bits(const Xmm& operand, std::int64_t at) {
  if (zmm_) {
    const Xbyak::Opmask bits = k2;
    kmovq(bits, qword[bk_ + at]);
    vpaddb(operand | bits, operand, constant(kConstFifthBit));
    return;
  }
  const Xmm spread = broadcast();
  vpbroadcastd(spread, dword[bk_ + at]);
  vpshufb(spread, spread, constant(kConstFifthBit + 1));   // byte j = bits byte j / 8
  vpand(spread, spread, constant(kConstFifthBit + 2));     // its bit j % 8
  vpcmpeqb(spread, spread, constant(kConstFifthBit + 2));  // 0xff where set
  vpand(spread, spread, constant(kConstFifthBit));
  vpor(operand, operand, spread);
}

void GemmGenerator::emit_dot(const Xmm& sum, const Xmm& x, int t, bool high) {
  if (isa_.vnni) {
    vpdpbusd(sum, weight(t, high), x);  // u8 weight operands x s8 activations
    return;
  }
  const Xmm temp = dot_temp();
  if (key_.bits == 8) {
    vpsignb(temp, x, weight(t, false));     // xq * sign(w)
    vpmaddubsw(temp, abs_weight(t), temp);  // |w| * (xq * sign(w)), pairs
  } else {
    vpmaddubsw(temp, weight(t, high), x);  // nibble * xq, pairs
  }
  vpmaddwd(temp, temp, constant(kConstOnes16));  // pairs -> quads
  vpaddd(sum, sum, temp);
}

}  // namespace qforge
