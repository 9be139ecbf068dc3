#include "ops/linear/call_split.h"

namespace qforge {

namespace {

template <typename Activations>
CallRows rows_of_activations(const Activations& x, const Epilogue& epilogue) {
  CallRows rows;
  rows.a_row_stride = x.row_stride;
  rows.groups = x.groups();
  rows.c_element_bytes = epilogue.output == OutputKind::u8 ? 1 : 4;
  return rows;
}

}  // namespace

CallRows call_rows_of(const QuantizedActivations& x, const Epilogue& epilogue) {
  return rows_of_activations(x, epilogue);
}

CallRows call_rows_of(const FloatActivations& x, const Epilogue& epilogue) {
  return rows_of_activations(x, epilogue);
}

GemmCallArgs rows_of(const GemmCallArgs& call, const CallRows& rows, std::int64_t first,
                     std::int64_t end) {
  GemmCallArgs part = call;
  // Only one of the operand kinds (s8, f32, bf16) is set; the others stay null.
  if (call.a != nullptr) part.a = call.a + first * rows.a_row_stride;
  if (call.a_scale != nullptr) part.a_scale = call.a_scale + first;
  if (call.a_sums != nullptr) part.a_sums = call.a_sums + first * rows.groups;
  if (call.a_f32 != nullptr)
    part.a_f32 = reinterpret_cast<const float*>(reinterpret_cast<const std::uint8_t*>(call.a_f32) +
                                                first * rows.a_row_stride);
  if (call.a_bf16 != nullptr)
    part.a_bf16 = reinterpret_cast<const std::uint16_t*>(
        reinterpret_cast<const std::uint8_t*>(call.a_bf16) + first * rows.a_row_stride);
  if (call.a_f32_sums != nullptr) part.a_f32_sums = call.a_f32_sums + first * rows.groups;
  part.c = static_cast<std::uint8_t*>(call.c) + first * call.c_stride * rows.c_element_bytes;
  if (call.residual != nullptr) part.residual = call.residual + first * call.residual_stride;
  part.m = end - first;
  return part;
}

}  // namespace qforge
