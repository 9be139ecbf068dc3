// The store phase of the GEMM generator: per-group correction + dequantization, then
// the epilogue (scale by a[m], bias, SwiGLU, residual) and masked stores.
#include "jit/gemm/gemm_generator.h"

#include <bit>

#include "jit/base/error.h"

namespace qforge {

using namespace Xbyak;
using namespace Xbyak::util;

// After a group's K rows, bk_ points at panel 0's trailer of that group:
//   [bk_ + pp * panel_bytes + 0]    scales[16]  f16
//   [bk_ + pp * panel_bytes + 32]   offset[16]  f16   (asymmetric only)
// or, two-level, at its integers, and super_ at the super-block's header:
//   [bk_ + pp * panel_bytes + 0]    sub_scales[16]   s8    scale  = float(sub) * super
//   [bk_ + pp * panel_bytes + 16]   sub_offsets[16]  s8    offset = float(sub) * super
//   [super_ + pp * panel_bytes]     super_scales[16] f16 | super_offsets[16] f16
// C = acc - bias * xsum (bias 128, 16 or 8; none where the AVX2 int8 sequence already
// multiplied v itself);                      fsum = fma(float(C), scale, fsum)
// asymmetric:                                fsum = fma(float(xsum), offset, fsum)
void GemmGenerator::emit_group_correction(int rows, int units) {
  if (woq_)
    emit_woq_group_correction(rows, units);
  else
    emit_group_correction_rows(rows, units);
  // The correction's temporaries may include the nibble mask's register: the next
  // group's K rows need it back.
  if (!woq_ && key_.bits != 8 && groups_ > 1) vmovups(nibble_mask(), constant(kConstNibbleMask));
  add(bk_, static_cast<int>(trailer_bytes_));
  add(sums_, 4);
  if (key_.epilogue.output == OutputKind::group_sums) add(out_, static_cast<int>(n_padded_ * 4));
}

// The bias * xsum the accumulators carry beyond C, as a shift of xsum (0: none).
int GemmGenerator::correction_shift() const {
  const int bias = key_.bits == 8 && !isa_.vnni ? 0 : layout_bias();
  return bias == 0 ? 0 : std::countr_zero(static_cast<unsigned>(bias));
}

// Row r's xsum is at [sums_ + r * groups * 4], its group sums go to out_ + r * groups * Np * 4
// and its float sums are fsum(r, t) or fsum_spill(r, t); a single group leaves
// y = float(C) * scale (+ float(xsum) * offset) in acc(r, t).
void GemmGenerator::emit_group_correction_rows(int rows, int units) {
  const int t_count = per_row(units);
  const bool asym = key_.asymmetric;
  const int shift = correction_shift();
  const Xmm correction = epilogue_temp(0), xsum = epilogue_temp(1);
  const bool sums_out = key_.epilogue.output == OutputKind::group_sums;
  const auto row_terms = [&](int r) {  // bias * xsum, and float(xsum) for the offset term
    const Address row_xsum = dword[sums_ + r * groups_ * 4];
    if (shift) {
      vpbroadcastd(correction, row_xsum);
      vpslld(correction, correction, shift);
    }
    if (asym && !sums_out) {
      vpbroadcastd(xsum, row_xsum);
      vcvtdq2ps(xsum, xsum);
    }
  };
  const auto correct = [&](int r, int t, int scale_temp = 3) {
    const int pp = panel_of(t), v = vector_of(t);
    const Xmm sum = acc(r, t);
    if (shift) vpsubd(sum, sum, correction);
    if (sums_out) {
      const std::int64_t at = r * groups_ * n_padded_ * 4 + pp * 64 + v * vector_bytes_;
      vmovups(vector_at(out_, at), sum);
      return;
    }
    vcvtdq2ps(sum, sum);
    emit_scaled_group_sum(r, t, xsum, scale_temp);
  };
  // A two-level scale costs four instructions a vector (eight asymmetric): formed once per
  // vector for all rows, the rows' two broadcasts repeated instead. A one-level scale is
  // one conversion: the rows stay outside, and a symmetric one is converted once for all
  // rows into temps 3 .. 3 + T - 1 where the K loop's weight registers leave room.
  if (superblock_groups_ && !sums_out && rows > 1) {
    for (int t = 0; t < t_count; ++t) {
      if (!active(t)) continue;
      emit_group_scales(panel_of(t), vector_of(t));
      for (int r = 0; r < rows; ++r) {
        row_terms(r);
        correct(r, t);
      }
    }
    return;
  }
  const int free_after_k_loop = isa_.registers - plan_.accumulators - plan_.float_sums;
  const bool held = !sums_out && !asym && rows > 1 && 3 + t_count <= free_after_k_loop;
  if (held)
    for (int t = 0; t < t_count; ++t)
      if (active(t)) emit_group_scale(epilogue_temp(3 + t), panel_of(t), vector_of(t), false);
  for (int r = 0; r < rows; ++r) {
    row_terms(r);
    for (int t = 0; t < t_count; ++t) {
      if (!active(t)) continue;
      if (!sums_out && !held) emit_group_scales(panel_of(t), vector_of(t));
      correct(r, t, held ? 3 + t : 3);
    }
  }
}

// The scale (or offset) lanes of panel pp's vector v into `out`: f16 from the trailer,
// or two-level, float(s8 sub) * f16 super (exact). Uses epilogue temp 5.
void GemmGenerator::emit_group_scale(const Xmm& out, int pp, int v, bool offset) {
  const std::int64_t panel = pp * panel_bytes_;
  const int lanes = v * vector_bytes_ / 4;  // the vector's first lane
  auto f16_at = [&](const Reg64& base, std::int64_t at) {
    return zmm_ ? yword[base + at] : xword[base + at];
  };
  if (!superblock_groups_) {
    vcvtph2ps(out, f16_at(bk_, panel + 2 * lanes + (offset ? kTrailerOffsetBytes : 0)));
    return;
  }
  const Xmm super = epilogue_temp(5);
  vpmovsxbd(out, ptr[bk_ + panel + lanes + (offset ? kTrailerSubOffsetBytes : 0)]);
  vcvtdq2ps(out, out);
  vcvtph2ps(super, f16_at(super_, panel + 2 * lanes + (offset ? kSuperOffsetBytes : 0)));
  vmulps(out, out, super);
}

// Panel pp's vector v's scales into epilogue temp 3 (and offsets into temp 4).
void GemmGenerator::emit_group_scales(int pp, int v) {
  emit_group_scale(epilogue_temp(3), pp, v, false);
  if (key_.asymmetric) emit_group_scale(epilogue_temp(4), pp, v, true);
}

// The float C of row r, vector t (in acc(r, t)) into its sums: fsum = fma(C, scale, fsum)
// (+ fma(xsum, offset, fsum) asymmetric; xsum a float broadcast), in registers, in the
// frame, or, for a single group, y = C * scale (+ xsum * offset) left in acc(r, t). The
// scales are in epilogue temps 3 (or scale_temp) and 4 (emit_group_scales); uses temp 2.
void GemmGenerator::emit_scaled_group_sum(int r, int t, const Xmm& xsum, int scale_temp) {
  const Xmm spill = epilogue_temp(2), scale = epilogue_temp(scale_temp), offset = epilogue_temp(4);
  const bool asym = key_.asymmetric;
  const Xmm sum = acc(r, t);
  if (groups_ == 1) {
    vmulps(sum, sum, scale);
    if (asym) vfmadd231ps(sum, xsum, offset);
  } else if (!plan_.float_sums_in_memory) {
    vfmadd231ps(fsum(r, t), sum, scale);
    if (asym) vfmadd231ps(fsum(r, t), xsum, offset);
  } else {
    vmovups(spill, fsum_spill(r, t));
    vfmadd231ps(spill, sum, scale);
    if (asym) vfmadd231ps(spill, xsum, offset);
    vmovups(fsum_spill(r, t), spill);
  }
}

namespace {
int log2_of(int bytes) {
  return bytes == 4 ? 2 : 0;
}
}  // namespace

void GemmGenerator::emit_epilogue(int rows, int units) {
  // y lives in the float sums (or the accumulators for a single group / spilled sums).
  if (groups_ > 1 && plan_.float_sums_in_memory)
    for (int r = 0; r < rows; ++r)
      for (int t = 0; t < per_row(units); ++t) vmovups(acc(r, t), fsum_spill(r, t));
  emit_epilogue_from_registers(rows, units);
}

// Uses row_ and unit_; clobbers tmp_, tmp2_, kloop_, out_, ak_, bk_, gloop_.
void GemmGenerator::emit_epilogue_from_registers(int rows, int units) {
  const int t_count = per_row(units);
  const bool u8_out = key_.epilogue.output == OutputKind::u8;
  const int element = u8_out ? 1 : 4;
  auto y = [&](int r, int t) {
    return groups_ > 1 && !plan_.float_sums_in_memory ? fsum(r, t) : acc(r, t);
  };
  // y *= a[row + r] (weight-only rows have no scale)
  if (!woq_) {
    mov(tmp_, ptr[args_ + offsetof(GemmCallArgs, a_scale)]);
    lea(tmp_, ptr[tmp_ + row_ * 4]);
    for (int r = 0; r < rows; ++r) {
      vbroadcastss(epilogue_temp(0), dword[tmp_ + r * 4]);
      for (int t = 0; t < t_count; ++t) vmulps(y(r, t), y(r, t), epilogue_temp(0));
    }
  }
  // Split activations: y(0) = y(0) + (y(1) + (... + y(D-1))), the tile's one output row.
  const int out_rows = split_ ? 1 : rows;
  if (split_)
    for (int t = 0; t < t_count; ++t) {
      for (int r = rows - 1; r >= 2; --r) vaddps(y(r - 1, t), y(r - 1, t), y(r, t));
      vaddps(y(0, t), y(0, t), y(1, t));
    }
  // The output (and residual) row of the tile's first row: row_, or row_ / D split.
  auto out_row = [&](const Reg64& dst) {
    if (split_ == 0) {
      mov(dst, row_);
    } else if (split_ == 2) {
      mov(dst, row_);
      shr(dst, 1);
    } else {
      QF_REQUIRE(split_ == 3, "gemm generator: ", split_, " digit rows");
      imul(dst, row_, 0x55555556);  // row_ = 3q < 2^31: (3q * (2^32 + 2) / 3) >> 32 = q
      shr(dst, 32);
    }
  };
  // Pointers: out_ = c + (row * c_stride + unit * 16) elements; kloop_ = row step bytes.
  mov(kloop_, ptr[args_ + offsetof(GemmCallArgs, c_stride)]);
  if (element > 1) shl(kloop_, log2_of(element));
  out_row(out_);
  imul(out_, kloop_);
  add(out_, ptr[args_ + offsetof(GemmCallArgs, c)]);
  mov(tmp_, unit_);
  shl(tmp_, 4 + log2_of(element));
  add(out_, tmp_);
  if (key_.epilogue.bias) {
    mov(ak_, unit_);
    shl(ak_, 6);
    add(ak_, ptr[args_ + offsetof(GemmCallArgs, bias)]);
  }
  if (key_.epilogue.residual) {
    mov(gloop_, ptr[args_ + offsetof(GemmCallArgs, residual_stride)]);
    shl(gloop_, 2);
    out_row(bk_);
    imul(bk_, gloop_);
    add(bk_, ptr[args_ + offsetof(GemmCallArgs, residual)]);
    mov(tmp_, unit_);
    shl(tmp_, 6);
    add(bk_, tmp_);
  }
  const int tail = static_cast<int>(key_.n % 16);
  for (int r = 0; r < out_rows; ++r) {
    for (int u = 0; u < units; ++u) {
      if (tail == 0) {
        emit_unit_epilogue(r, u, 16);
        continue;
      }
      Label full, next;
      lea(tmp2_, ptr[unit_ + u]);
      cmp(tmp2_, static_cast<int>(key_.units() - 1));
      jne(full, T_NEAR);
      emit_unit_epilogue(r, u, tail);
      jmp(next, T_NEAR);
      L(full);
      emit_unit_epilogue(r, u, 16);
      L(next);
    }
    add(out_, kloop_);
    if (key_.epilogue.residual) add(bk_, gloop_);
  }
}

// One unit (16 output columns) of row r: `columns` of them are stored.
void GemmGenerator::emit_unit_epilogue(int r, int u, int columns) {
  const int lanes_per_vector = vector_bytes_ / 4;
  for (int s = 0; s < slice_vectors_; ++s) {
    const int v = slice_first_ + s;  // vector of the panel this pass holds
    const int lanes = std::clamp(columns - v * lanes_per_vector, 0, lanes_per_vector);
    if (lanes == 0) continue;
    const int t_gate = u * panels_per_unit_ * slice_vectors_ + s;
    const Xmm y = groups_ > 1 && !plan_.float_sums_in_memory ? fsum(r, t_gate) : acc(r, t_gate);
    const int column_bytes = u * 64 + v * vector_bytes_;
    if (key_.epilogue.bias) emit_masked_load_add(y, ak_, column_bytes, lanes);
    if (key_.epilogue.swiglu) {
      const int t_up = t_gate + slice_vectors_;
      const Xmm up = groups_ > 1 && !plan_.float_sums_in_memory ? fsum(r, t_up) : acc(r, t_up);
      emit_silu(y, 0);
      vmulps(y, y, up);
    }
    if (key_.epilogue.residual) emit_masked_load_add(y, bk_, column_bytes, lanes);
    if (key_.epilogue.output == OutputKind::u8)
      emit_store_u8(y, out_, u * 16 + v * lanes_per_vector, lanes);
    else
      emit_store(y, vector_at(out_, column_bytes), lanes);
  }
}

void GemmGenerator::emit_masked_load_add(const Xmm& y, const Reg64& base, int offset, int lanes) {
  const int full = vector_bytes_ / 4;
  if (lanes == full) {
    vaddps(y, y, vector_at(base, offset));
    return;
  }
  if (zmm_) {
    mov(tmp2_.cvt32(), (1u << lanes) - 1);
    kmovw(k1, tmp2_.cvt32());
    vmovups(epilogue_temp(5) | k1 | T_z, vector_at(base, offset));
  } else {
    vmovups(epilogue_temp(4),
            yword[rip + constants_ + kConstLaneMasks * vector_bytes_ + (8 - lanes) * 4]);
    vmaskmovps(epilogue_temp(5), epilogue_temp(4), vector_at(base, offset));
  }
  vaddps(y, y, epilogue_temp(5));
}

void GemmGenerator::emit_store(const Xmm& y, const Address& at, int lanes) {
  const int full = vector_bytes_ / 4;
  if (lanes == full) {
    vmovups(at, y);
  } else if (zmm_) {
    mov(tmp2_.cvt32(), (1u << lanes) - 1);
    kmovw(k1, tmp2_.cvt32());
    vmovups(at | k1, y);
  } else {
    vmovups(epilogue_temp(4),
            yword[rip + constants_ + kConstLaneMasks * vector_bytes_ + (8 - lanes) * 4]);
    vmaskmovps(at, epilogue_temp(4), y);
  }
}

// u8 = clamp(round_half_away(y / out_scale) + zero_point, 0, 255)
void GemmGenerator::emit_store_u8(const Xmm& y, const Reg64& base, int byte_offset, int lanes) {
  const Xmm temp = epilogue_temp(0);
  vbroadcastss(temp, dword[args_ + offsetof(GemmCallArgs, out_scale)]);
  vdivps(y, y, temp);
  emit_round_half_away(y, temp);
  vbroadcastss(temp, dword[args_ + offsetof(GemmCallArgs, out_zero_point)]);
  vaddps(y, y, temp);
  vmaxps(y, y, constant(kConstZero));
  vminps(y, y, constant(kConst255));
  vcvtps2dq(y, y);
  const int full = vector_bytes_ / 4;
  if (zmm_) {
    if (lanes == full) {
      vpmovdb(xword[base + byte_offset], y);
    } else {
      mov(tmp2_.cvt32(), (1u << lanes) - 1);
      kmovw(k1, tmp2_.cvt32());
      vpmovdb(xword[base + byte_offset] | k1, y);
    }
    return;
  }
  const Xbyak::Xmm low(y.getIdx()), high(temp.getIdx());
  vextracti128(high, Ymm(y.getIdx()), 1);
  vpackusdw(low, low, high);
  vpackuswb(low, low, low);
  if (lanes == full) {
    vmovq(qword[base + byte_offset], low);
  } else {
    for (int i = 0; i < lanes; ++i) vpextrb(byte[base + byte_offset + i], low, i);
  }
}

}  // namespace qforge
