#include "jit/gemm/amx_generator.h"

#include <cstddef>
#include <limits>
#include <string>

#include "jit/base/aligned_buffer.h"
#include "jit/base/error.h"
#include "jit/gemm/woq_fields.h"

namespace qforge {

using namespace Xbyak;
using namespace Xbyak::util;

namespace {

constexpr std::size_t kMaxCodeBytes = 256 << 10;
constexpr int kPackedRowBytes = 64;

// The stack frame, bytes from rsp. Row r of a block owns 128 bytes in the stage and in
// the float sums (panel t at + t * 64), so one pointer (rowp) walks both.
//
//   [kStage, +4096)        C tiles stored as int32 [32 rows][2 panels][16]  (stride 128)
//   [kSums, +4096)         float sums            f32 [32 rows][2 panels][16]
//   [kLiveConfig, +64)     the thread's tile configuration (sttilecfg)
//   [kNextRow, +8)         first row not stored yet
//   [kLastBlockRow, +8)    M - R, where the last block starts
//   [kCursor, +8)          int4: the next step's B tiles in the unpacked panels
//   [kSuper, +8)           two-level scales: the super-block header (loaded into rax for
//                          the group dequantization)
//   [kUnpacked, + Kp * 32) int4: the unit block's panels unpacked to u8 B tiles, once per
//                          unit block for every row block of the call (L2-resident):
//                            step s (K steps over all groups), panel j:
//                            [kUnpacked + (s * 2 + j) * B] = step_k / 4 rows x 64 bytes,
//                            B = step_k / 4 * 64
//                          (bf16: + Kp * 64, B tiles of bf16 pairs: 16 rows a step of
//                          32 k, B = 1024)
constexpr int kRowBytes = kAmxBlockPanels * 64;
constexpr int kStage = 0;
constexpr int kSums = kStage + kAmxBlockRows * kRowBytes;
constexpr int kLiveConfig = kSums + kAmxBlockRows * kRowBytes;
constexpr int kNextRow = kLiveConfig + kAmxConfigBytes;
constexpr int kLastBlockRow = kNextRow + 8;
constexpr int kCursor = kLastBlockRow + 8;
constexpr int kSuper = kCursor + 8;
constexpr int kUnpacked = (kSuper + 8 + 63) / 64 * 64;
constexpr int kPageBytes = 4096;

// Vector registers of the K loop (the store phase uses zmm0-5 and the accumulators from
// zmm31 down, see register_budget.h); the bf16 unpacking's table and rows reuse them.
const Zmm kNibbleMask(8), kLowNibbles(9), kHighNibbles(10);
const Zmm kBf16Table(8), kPackedRow(9), kPairRow(10);

bool fits_int32(std::int64_t value) {
  return value <= std::numeric_limits<std::int32_t>::max();
}

}  // namespace

AmxGenerator::AmxGenerator(const GemmKey& key) : GemmGenerator(key, kMaxCodeBytes, GeometryOnly{}) {
  QF_REQUIRE(key.isa == Isa::amx, "amx generator: ISA ", isa_name(key.isa),
             " is not served by this generator");
  QF_REQUIRE(!key.weight_only() || (bf16_ && key.bits == 4),
             "amx generator: weight-only kernels on tiles take int4 weights and bf16 "
             "activations (tdpbf16ps); the vector generator serves ",
             kernel_name(key));
  QF_REQUIRE(key.split_digits() == 0,
             "amx generator: split activations are for the vector generator's decode tiles, not ",
             kernel_name(key));
  step_k_ = amx_step_k(key);
  step_a_bytes_ = amx_step_bytes(key);
  QF_REQUIRE(step_k_ != 0, "amx generator: unsupported group size ", key.group,
             bf16_ ? " (bf16 tiles take K in steps of 32" : " (tiles take K in steps of 64 or 32",
             "; the zmm kernels serve it)");
  const Blocking tiles = amx_blocking(key);
  QF_REQUIRE(key.blocking == tiles, "amx generator: blocking ", key.blocking.mr, "x",
             key.blocking.nr, "u", key.blocking.k_unroll, " is not the tile blocking ", tiles.mr,
             "x", tiles.nr, "u", tiles.k_unroll, " of ", kernel_name(key));
  QF_REQUIRE(fits_int32(panel_bytes_ * panels_per_unit_) && fits_int32(a_stride_ * kAmxBlockRows) &&
                 fits_int32(groups_ * n_padded_ * 4 * kAmxBlockRows),
             "amx generator: ", kernel_name(key), " is too large for 32-bit offsets");
  // Float sums always live in the frame; y is loaded from there into acc(0, t).
  plan_ = RegisterPlan{};
  plan_.accumulators = kAmxBlockPanels;
  plan_.float_sums_in_memory = true;
  max_per_row_ = kAmxBlockPanels;
  spill_displacement_ = kSums;

  // Unpacked B tiles per k: 32 columns of u8, or of bf16.
  const std::int64_t unpacked_bytes = key.bits != 8 ? key.k_padded * 32 * (bf16_ ? 2 : 1) : 0;
  QF_REQUIRE(fits_int32(kUnpacked + unpacked_bytes), "amx generator: ", kernel_name(key),
             " is too large for 32-bit offsets");
  const int frame_bytes = static_cast<int>(round_up(kUnpacked + unpacked_bytes, kPageBytes));
  StackFrame frame(this, 1, 13, frame_bytes, /*makeEpilog=*/false);
  bind_frame_registers(frame);
  rows_ = frame.t[10];
  rowp_ = frame.t[11];
  rows_left_ = frame.t[12];
  spill_base_ = rowp_;
  super_ = rax;
  super_slot_ = kSuper;
  emit_stack_probe(frame_bytes);

  Label done;
  emit_prologue(done);
  emit_unit_blocks();
  L(done);
  vzeroupper();
  frame.close();
  emit_constants();
  emit_tile_configs();
  kernel_ = reinterpret_cast<GemmKernelFn>(const_cast<std::uint8_t*>(finalize()));
}

// R = ceil(M / blocks), blocks = ceil(M / 32); then the tile configuration for R, loaded
// only when the thread's live one differs (sttilecfg stores 64 zero bytes when none is).
void AmxGenerator::emit_prologue(const Label& done) {
  mov(rax, ptr[args_ + offsetof(GemmCallArgs, m)]);
  test(rax, rax);
  jle(done, T_NEAR);
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, unit_end)]);
  cmp(tmp_, ptr[args_ + offsetof(GemmCallArgs, unit_begin)]);
  jle(done, T_NEAR);
  lea(tmp_, ptr[rax + kAmxBlockRows - 1]);
  shr(tmp_, 5);  // blocks
  static_assert(kAmxBlockRows == 1 << 5);
  mov(rows_, kAmxBlockRows);
  Label shrink, found;
  L(shrink);  // the smallest R with R * blocks >= M
  lea(tmp2_, ptr[rows_ - 1]);
  imul(tmp2_, tmp_);
  cmp(tmp2_, rax);
  jl(found, T_NEAR);
  dec(rows_);
  jmp(shrink, T_NEAR);
  L(found);
  sub(rax, rows_);
  mov(ptr[rsp + kLastBlockRow], rax);

  mark("tile configuration");
  Label loaded;
  sttilecfg(ptr[rsp + kLiveConfig]);
  mov(tmp2_, rows_);
  shl(tmp2_, 6);
  lea(tmp_, ptr[rip + configs_]);
  lea(tmp_, ptr[tmp_ + tmp2_ - kAmxConfigBytes]);  // config[R], R = 1..32
  vmovdqu32(Zmm(0), zword[tmp_]);
  vpcmpeqd(k1, Zmm(0), zword[rsp + kLiveConfig]);
  kortestw(k1, k1);
  jc(loaded, T_NEAR);  // all 16 dwords equal
  ldtilecfg(ptr[tmp_]);
  L(loaded);
}

void AmxGenerator::emit_unit_blocks() {
  const int block_units = kAmxBlockPanels / panels_per_unit_;
  Label loop, tail, done;
  mov(unit_, ptr[args_ + offsetof(GemmCallArgs, unit_begin)]);
  L(loop);
  mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, unit_end)]);
  sub(tmp_, unit_);
  jle(done, T_NEAR);
  cmp(tmp_, block_units);
  jl(tail, T_NEAR);
  emit_row_blocks(block_units);
  add(unit_, block_units);
  jmp(loop, T_NEAR);
  L(tail);
  if (block_units > 1) emit_row_blocks(1);  // one panel left (never for SwiGLU pairs)
  L(done);
}

// Touches the frame a page at a time from its top down, so a frame larger than the
// thread's remaining stack meets the guard page (a clean fault) instead of skipping it.
void AmxGenerator::emit_stack_probe(int frame_bytes) {
  if (frame_bytes <= kPageBytes) return;
  Label probe;
  mov(rax, frame_bytes);
  L(probe);
  sub(rax, kPageBytes);
  or_(byte[rsp + rax], 0);
  jnz(probe, T_NEAR);
}

void AmxGenerator::emit_row_blocks(int units) {
  Label loop, start_ok, two_row_tiles, next, done;
  if (key_.bits != 8) emit_unpack_panels(units);
  mov(qword[rsp + kNextRow], 0);
  L(loop);
  mov(row_, ptr[rsp + kNextRow]);
  cmp(row_, ptr[args_ + offsetof(GemmCallArgs, m)]);
  jge(done, T_NEAR);
  cmp(row_, ptr[rsp + kLastBlockRow]);
  jle(start_ok, T_NEAR);
  mov(row_, ptr[rsp + kLastBlockRow]);
  L(start_ok);
  cmp(rows_, kAmxTileRows);
  jg(two_row_tiles, T_NEAR);
  emit_block(1, units);
  jmp(next, T_NEAR);
  L(two_row_tiles);
  emit_block(2, units);
  L(next);
  add(ptr[rsp + kNextRow], rows_);
  jmp(loop, T_NEAR);
  L(done);
}

void AmxGenerator::emit_block(int row_tiles, int units) {
  const int panels = units * panels_per_unit_;
  const bool sums_out = key_.epilogue.output == OutputKind::group_sums;
  const std::string block =
      "tiles " + std::to_string(row_tiles) + "x" + std::to_string(panels) + ": ";
  tile_rows_ = 1;
  tile_per_row_ = panels;

  // Stream pointers: B at this unit block, A and xsum at this row block.
  imul(bk_, unit_, static_cast<int>(panels_per_unit_ * panel_bytes_));
  add(bk_, ptr[args_ + offsetof(GemmCallArgs, b)]);
  imul(ak_, row_, static_cast<int>(a_stride_));
  add(ak_, ptr[args_ + (bf16_ ? offsetof(GemmCallArgs, a_bf16) : offsetof(GemmCallArgs, a))]);
  imul(sums_, row_, static_cast<int>(groups_ * 4));  // int32 xsum, or float (bf16)
  add(sums_,
      ptr[args_ + (bf16_ ? offsetof(GemmCallArgs, a_f32_sums) : offsetof(GemmCallArgs, a_sums))]);
  if (sums_out) {
    // out = c + (row * groups * Np + unit * 16 * panels_per_unit) * 4
    imul(out_, row_, static_cast<int>(groups_ * n_padded_ * 4));
    add(out_, ptr[args_ + offsetof(GemmCallArgs, c)]);
    imul(tmp_, unit_, 64 * panels_per_unit_);
    add(out_, tmp_);
  } else if (groups_ > 1) {
    vpxord(Zmm(0), Zmm(0), Zmm(0));
    for (int r = 0; r < row_tiles * kAmxTileRows; ++r)
      for (int t = 0; t < panels; ++t) vmovups(zword[rsp + kSums + r * kRowBytes + t * 64], Zmm(0));
  }
  if (key_.bits != 8) {  // this block's B tiles start at the first step's
    lea(rax, ptr[rsp + kUnpacked]);
    mov(ptr[rsp + kCursor], rax);
  }

  mark(block + "K loop");
  const std::int64_t steps = key_.group / step_k_;
  Label group_loop, step_loop;
  if (superblock_groups_) emit_first_super_header();
  if (groups_ > 1) {
    mov(gloop_, groups_);
    L(group_loop);
  }
  for (int i = 0; i < row_tiles; ++i)
    for (int j = 0; j < panels; ++j) tilezero(Tmm(amx_c_tile(i, j)));
  mov(tmp_, a_stride_);       // A tile stride
  mov(tmp2_, kAmxTileBytes);  // B tile stride
  if (steps > 1) {
    mov(kloop_, steps);
    L(step_loop);
  }
  emit_k_step(row_tiles, panels);
  if (steps > 1) {
    dec(kloop_);
    jnz(step_loop, T_NEAR);
  }
  mark(block + "group dequant");
  emit_group_dequant(row_tiles, units);
  if (groups_ > 1) {
    dec(gloop_);
    if (superblock_groups_)
      emit_next_super_header(group_loop);
    else
      jnz(group_loop, T_NEAR);
  }
  if (!sums_out) {
    mark(block + "epilogue");
    emit_block_epilogue(units);
  }
}

// One step of step_k (64 or 32) k: B tiles from the packed rows (panel j at bk_ + j * panel_bytes),
// A tiles from the xq rows (row tile i at ak_ + i * 16 * a_stride), then the 2 x 2 products. Tile
// memory operands are written base + stride * 1: the stride must be the SIB index.
// bf16: 32 k, B tiles from the unpacked pairs, A tiles from the bf16 rows, f32 products.
void AmxGenerator::emit_k_step(int row_tiles, int panels) {
  const int b_tile_bytes = step_a_bytes_ / 4 * kAmxTileBytes;
  if (key_.bits != 8) mov(rax, ptr[rsp + kCursor]);
  for (int j = 0; j < panels; ++j) {
    if (key_.bits == 8)
      tileloadd(Tmm(amx_b_tile(j)), ptr[bk_ + j * panel_bytes_ + tmp2_ * 1]);
    else
      tileloadd(Tmm(amx_b_tile(j)), ptr[rax + j * b_tile_bytes + tmp2_ * 1]);
  }
  if (key_.bits != 8) add(qword[rsp + kCursor], kAmxBlockPanels * b_tile_bytes);
  for (int i = 0; i < row_tiles; ++i)
    tileloadd(Tmm(amx_a_tile(i)), ptr[ak_ + i * kAmxTileRows * a_stride_ + tmp_ * 1]);
  for (int i = 0; i < row_tiles; ++i)
    for (int j = 0; j < panels; ++j) {
      if (bf16_)
        tdpbf16ps(Tmm(amx_c_tile(i, j)), Tmm(amx_a_tile(i)), Tmm(amx_b_tile(j)));
      else
        tdpbsud(Tmm(amx_c_tile(i, j)), Tmm(amx_a_tile(i)), Tmm(amx_b_tile(j)));  // s8 A x u8 B
    }
  add(ak_, step_a_bytes_);
  add(bk_, static_cast<int>(step_bytes_ * (step_k_ / k_per_step_)));
}

// int4 packed row q (64 bytes, 16 columns x 8 k) holds quads 2q (low nibbles) and 2q + 1
// (high nibbles); as u8 B tile rows:
//   B[2q][4c + i] = w[c][8q + i] & 15        B[2q + 1][4c + i] = w[c][8q + 4 + i] >> 4
// (int5: each 32-k chunk's nibble rows, plus 16 where its bit row says so, packed_layout.h)
// bf16: packed row q gives B rows 4q + j, j = 0..3, each column's dword the bf16 pair j
// (woq_fields.h) looked up from its nibbles: vpermw of the row shifted by 4j words-wise.
// Every group of the unit block's panels, once, into [kUnpacked] (layout above), before
// its row blocks: each row block then loads B tiles as the int8 kernel does, so the
// unpacking costs once per unit block, not once per row block. Uses bk_, kloop_, gloop_,
// rax and tmp_ (free before the row blocks).
void AmxGenerator::emit_unpack_panels(int units) {
  const int panels = units * panels_per_unit_;
  const int b_tile_bytes = step_a_bytes_ / 4 * kAmxTileBytes;
  const int nibble_rows_per_step = step_k_ / 8;
  const std::int64_t steps_per_group = key_.group / step_k_;
  mark(bf16_            ? "unpack int4 panels to bf16 pairs"
       : key_.bits == 5 ? "unpack int5 panels"
                        : "unpack int4 panels");
  if (bf16_)
    vmovups(kBf16Table, constant(kConstBf16Nibbles));
  else
    vmovups(kNibbleMask, constant(kConstNibbleMask));
  imul(bk_, unit_, static_cast<int>(panels_per_unit_ * panel_bytes_));
  add(bk_, ptr[args_ + offsetof(GemmCallArgs, b)]);
  lea(rax, ptr[rsp + kUnpacked]);
  Label group_loop, step_loop;
  if (superblock_groups_) emit_first_super_header(/*record=*/false);
  mov(gloop_, groups_);
  L(group_loop);
  mov(kloop_, steps_per_group);
  L(step_loop);
  for (int j = 0; j < panels; ++j)
    for (int q = 0; q < nibble_rows_per_step; ++q) {
      if (bf16_)
        emit_unpack_bf16_pairs(j, q);
      else
        emit_unpack_quads(j, q);
    }
  add(rax, kAmxBlockPanels * b_tile_bytes);
  add(bk_, static_cast<int>(step_k_ * 2 * key_.bits));
  dec(kloop_);
  jnz(step_loop, T_NEAR);
  add(bk_, static_cast<int>(trailer_bytes_));  // past the group's trailer
  dec(gloop_);
  if (superblock_groups_)
    emit_next_super_header(group_loop, /*record=*/false);  // past the headers
  else
    jnz(group_loop, T_NEAR);
}

// Packed row q of the step in panel j (int4: row q; int5: row q % 4 of chunk q / 4, its
// bits after the chunk's 4 rows) -> u8 B rows 2q and 2q + 1 of panel j's tile at rax.
void AmxGenerator::emit_unpack_quads(int j, int q) {
  const int b_tile_bytes = step_a_bytes_ / 4 * kAmxTileBytes;
  const std::int64_t chunk = key_.bits == 5 ? q / 4 * step_bytes_ : 0;
  const int row = key_.bits == 5 ? q % 4 : q;
  const std::int64_t at = j * panel_bytes_ + chunk + row * kPackedRowBytes;
  vmovdqu32(kLowNibbles, zword[bk_ + at]);
  vpsrlw(kHighNibbles, kLowNibbles, 4);
  vpandd(kLowNibbles, kLowNibbles, kNibbleMask);
  vpandd(kHighNibbles, kHighNibbles, kNibbleMask);
  if (key_.bits == 5) {
    const std::int64_t bits = j * panel_bytes_ + chunk + 4 * kPackedRowBytes + 16 * row;
    emit_fifth_bits(kLowNibbles, bits);
    emit_fifth_bits(kHighNibbles, bits + 8);
  }
  const int tile = j * b_tile_bytes;
  vmovdqu32(zword[rax + tile + (2 * q) * kAmxTileBytes], kLowNibbles);
  vmovdqu32(zword[rax + tile + (2 * q + 1) * kAmxTileBytes], kHighNibbles);
}

// Packed int4 row q of the step in panel j -> bf16 B rows 4q .. 4q + 3 of panel j's tile
// at rax: pair p of every column (woq_fields.h) looked up from the row shifted by 4p.
void AmxGenerator::emit_unpack_bf16_pairs(int j, int q) {
  const int b_tile_bytes = step_a_bytes_ / 4 * kAmxTileBytes;
  vmovdqu32(kPackedRow, zword[bk_ + j * panel_bytes_ + q * kPackedRowBytes]);
  for (int pair = 0; pair < kWoqBf16Pairs; ++pair) {
    if (pair == 0) {
      vpermw(kPairRow, kPackedRow, kBf16Table);
    } else {
      vpsrlw(kPairRow, kPackedRow, 4 * pair);
      vpermw(kPairRow, kPairRow, kBf16Table);
    }
    vmovdqu32(zword[rax + j * b_tile_bytes + (kWoqBf16Pairs * q + pair) * kAmxTileBytes], kPairRow);
  }
}

// After a group's steps bk_ points at the group's trailer. The C tiles go to the stage,
// then each of the R rows runs GemmGenerator's correction with its xsum at [sums_], its
// group sums at [out_] and its float sums at [rowp_ + kSums].
void AmxGenerator::emit_group_dequant(int row_tiles, int units) {
  const int panels = units * panels_per_unit_;
  const bool sums_out = key_.epilogue.output == OutputKind::group_sums;
  mov(rax, kRowBytes);
  for (int i = 0; i < row_tiles; ++i)
    for (int j = 0; j < panels; ++j)
      tilestored(ptr[rsp + kStage + i * kAmxTileRows * kRowBytes + j * 64 + rax * 1],
                 Tmm(amx_c_tile(i, j)));
  if (superblock_groups_) mov(super_, qword[rsp + kSuper]);  // rax: the super-block header
  Label row_loop;
  mov(rowp_, rsp);
  mov(rows_left_, rows_);
  L(row_loop);
  for (int t = 0; t < panels; ++t) vmovdqu32(acc(0, t), zword[rowp_ + kStage + t * 64]);
  if (bf16_)
    emit_woq_group_correction(1, units);  // f32 C: the float group correction
  else
    emit_group_correction_rows(1, units);
  if (groups_ == 1 && !sums_out)
    for (int t = 0; t < panels; ++t) vmovups(fsum_spill(0, t), acc(0, t));
  add(rowp_, kRowBytes);
  add(sums_, static_cast<int>(groups_ * 4));
  if (sums_out) add(out_, static_cast<int>(groups_ * n_padded_ * 4));
  dec(rows_left_);
  jnz(row_loop, T_NEAR);
  // Back to row 0, then on to the next group.
  imul(tmp_, rows_, static_cast<int>(groups_ * 4));
  sub(sums_, tmp_);
  if (sums_out) {
    imul(tmp_, rows_, static_cast<int>(groups_ * n_padded_ * 4));
    sub(out_, tmp_);
  }
  add(bk_, static_cast<int>(trailer_bytes_));
  add(sums_, 4);
  if (sums_out) add(out_, static_cast<int>(n_padded_ * 4));
}

// Rows [next row, row_ + R) of the block, one at a time through GemmGenerator's epilogue.
void AmxGenerator::emit_block_epilogue(int units) {
  const int panels = units * panels_per_unit_;
  Label row_loop;
  mov(tmp_, ptr[rsp + kNextRow]);
  sub(tmp_, row_);  // rows the block before already stored
  mov(rows_left_, rows_);
  sub(rows_left_, tmp_);
  imul(rowp_, tmp_, kRowBytes);
  add(rowp_, rsp);
  mov(row_, ptr[rsp + kNextRow]);
  L(row_loop);
  for (int t = 0; t < panels; ++t) vmovups(acc(0, t), fsum_spill(0, t));
  emit_epilogue_from_registers(1, units);
  add(rowp_, kRowBytes);
  inc(row_);
  dec(rows_left_);
  jnz(row_loop, T_NEAR);
}

// config[R - 1] for R = 1..32, after the constant table.
void AmxGenerator::emit_tile_configs() {
  align(64);
  L(configs_);
  for (int rows = 1; rows <= kAmxBlockRows; ++rows)
    for (std::uint8_t byte : amx_tile_config(rows, step_a_bytes_)) db(byte);
}

}  // namespace qforge
