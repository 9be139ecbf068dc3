// Names generated code for profilers. With QFORGE_PERF_MAP=1 every kernel the code cache
// generates is appended to /tmp/perf-<pid>.map as `<start hex> <size hex> <kernel name>`
// (the format `perf report` reads for JIT code), so a profile shows
// `gemm_u8s8_avx512vnni_n2048_k5632_g32_...` where it would show bare addresses.
#pragma once

#include <cstddef>
#include <string_view>

namespace qforge {

bool perf_map_enabled();  // QFORGE_PERF_MAP set and not "0", read once
void note_generated_code(const void* start, std::size_t bytes, std::string_view name);

}  // namespace qforge
