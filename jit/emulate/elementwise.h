// Element-wise instruction shapes shared by the ALU families:
//
//   map_unary<T>:    dest[i] = fn(src1[i])
//   map_binary<T>:   dest[i] = fn(src1[i], src2[i])
//   map_ternary<T>:  dest[i] = fn(dest[i], src1[i], src2[i])
//
// over the vector length, then the destination is written under the opmask; and
//
//   blend_by_mask<T>: dest[i] = k[i] ? src2[i] : src1[i]  (0 instead of src1 with {z})
//
// where the opmask selects between the sources instead of masking the write.
#pragma once

#include "jit/emulate/operation.h"
#include "jit/emulate/vector.h"

namespace qforge::emulate {

template <typename T, typename Fn>
Status map_unary(Operation& op, Fn fn) {
  const Vec a = op.source_masked(1);
  Vec r = zero_vector();
  const unsigned n = op.vector_bytes() / sizeof(T);
  for (unsigned i = 0; i < n; ++i) r.set<T>(i, static_cast<T>(fn(a.get<T>(i))));
  op.write_destination(r);
  return Status::kDone;
}

template <typename T, typename Fn>
Status map_binary(Operation& op, Fn fn) {
  const Vec a = op.source_masked(1), b = op.source_masked(2);
  Vec r = zero_vector();
  const unsigned n = op.vector_bytes() / sizeof(T);
  for (unsigned i = 0; i < n; ++i) r.set<T>(i, static_cast<T>(fn(a.get<T>(i), b.get<T>(i))));
  op.write_destination(r);
  return Status::kDone;
}

template <typename T, typename Fn>
Status map_ternary(Operation& op, Fn fn) {
  const Vec d = op.source(0), a = op.source_masked(1), b = op.source_masked(2);
  Vec r = zero_vector();
  const unsigned n = op.vector_bytes() / sizeof(T);
  for (unsigned i = 0; i < n; ++i)
    r.set<T>(i, static_cast<T>(fn(d.get<T>(i), a.get<T>(i), b.get<T>(i))));
  op.write_destination(r);
  return Status::kDone;
}

template <typename T>
Status blend_by_mask(Operation& op) {
  const Vec a = op.source(1), b = op.source_masked(2);
  Vec r = zero_vector();
  const unsigned n = op.vector_bytes() / sizeof(T);
  for (unsigned i = 0; i < n; ++i) {
    if (op.selected(i)) {
      r.set<T>(i, b.get<T>(i));
    } else if (!op.zeroing()) {
      r.set<T>(i, a.get<T>(i));
    }
  }
  op.write_destination_unmasked(r);
  return Status::kDone;
}

}  // namespace qforge::emulate
