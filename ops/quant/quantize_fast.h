// The packing hot loop: the same arithmetic as ops/quant/quantize.h, eight values at a
// time with AVX2 where the CPU has it. Bit-identical to the scalar definition (IEEE
// division, exact round-half-away, the same clamps), which the pack tests check by
// comparing unpack(pack(W)) with quantize_reference(W).
#pragma once

#include <cstdint>

#include "ops/quant/quantize.h"

namespace qforge {

// choose_group_params over `count` values; *finite (when given) says whether every one
// of them is finite (the same pass reads them).
GroupParams choose_group_params_fast(const float* values, std::int64_t count, int bits,
                                     bool asymmetric, bool* finite = nullptr);

// The packed operand bytes of one group:
//   operands[i] = quantize_value(i < count ? values[i] : 0, params) + offset,  i in [0, group)
// with offset = operand_of(0, bits, asymmetric) (ops/quant/pack.h), so every byte is in
// [0, 255].
void quantize_operands_fast(const float* values, std::int64_t count, std::int64_t group,
                            const GroupParams& params, int bits, bool asymmetric, int offset,
                            std::uint8_t* operands);

}  // namespace qforge
