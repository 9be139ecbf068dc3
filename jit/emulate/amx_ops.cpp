// AMX (palette 1) on thread-local tile state: configuration, tile loads and stores, and
// the int8 / bf16 tile dot products, following the SDM pseudo-code.
//
//   TileState (one per thread, INIT state in a new thread)
//     config.palette       0 = INIT: no tiles; only ldtilecfg/sttilecfg/tilerelease run
//     config.start_row     restart row of an interrupted load/store (reset to 0 by each)
//     config.colsb[t]      bytes per row of tmm t (<= 64)      0 x 0 = tile unused
//     config.rows[t]       rows of tmm t (<= 16)
//     data[t][row][byte]   tmm0..7: 16 rows x 64 bytes; everything outside the configured
//                          rows x colsb reads as zero after any write
//
//   64-byte memory config (ldtilecfg / sttilecfg):
//     byte 0 palette, 1 start_row, 2..15 zero, 16+2t colsb[t] (u16), 32..47 zero,
//     48+t rows[t], 56..63 zero
//
// Tile memory operands use SIB addressing: row r of the tile is at base + disp + r * stride
// where stride = index * scale (the index register is not part of the row-0 address).
//
// Shapes that raise #UD (or #GP for an invalid ldtilecfg) on hardware return kInvalid, so
// the fault reaches whoever handles SIGILL, as it would on a CPU with AMX.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "jit/emulate/float_bits.h"
#include "jit/emulate/float_env.h"
#include "jit/emulate/op_table.h"

namespace qforge::emulate {
namespace {

constexpr unsigned kTiles = 8, kMaxRows = 16, kBytesPerRow = 64, kConfigBytes = 64;

struct TileConfig {
  std::uint8_t palette;
  std::uint8_t start_row;
  std::uint16_t colsb[kTiles];
  std::uint8_t rows[kTiles];
};

struct TileState {
  TileConfig config;
  alignas(64) std::uint8_t data[kTiles][kMaxRows][kBytesPerRow];
};

// initial-exec: the handler must reach its thread's state without __tls_get_addr.
static thread_local TileState tls_tiles __attribute__((tls_model("initial-exec")));

void reset_tiles() {
  std::memset(&tls_tiles, 0, sizeof tls_tiles);
}

bool configured() {
  return tls_tiles.config.palette == 1;
}

bool usable(unsigned tile) {
  return configured() && tile < kTiles && tls_tiles.config.rows[tile] != 0 &&
         tls_tiles.config.colsb[tile] != 0;
}

unsigned rows_of(unsigned tile) {
  return tls_tiles.config.rows[tile];
}
unsigned colsb_of(unsigned tile) {
  return tls_tiles.config.colsb[tile];
}

// write_row_and_zero: `bytes` of data into the row, zero for the rest of it.
void write_row(unsigned tile, unsigned row, const void* data, unsigned bytes) {
  std::uint8_t* target = tls_tiles.data[tile][row];
  std::memcpy(target, data, bytes);
  std::memset(target + bytes, 0, kBytesPerRow - bytes);
}

// zero_upper_rows: rows from `first` to the end of the tile become zero.
void zero_rows_from(unsigned tile, unsigned first) {
  for (unsigned row = first; row < kMaxRows; ++row)
    std::memset(tls_tiles.data[tile][row], 0, kBytesPerRow);
}

bool all_zero(const std::uint8_t* bytes, unsigned count) {
  for (unsigned i = 0; i < count; ++i)
    if (bytes[i]) return false;
  return true;
}

// --- configuration ----------------------------------------------------------------------

Status load_config(Operation& op) {
  std::uint8_t memory[kConfigBytes];
  read_memory(op.address(0), memory, kConfigBytes);
  if (memory[0] == 0) {
    reset_tiles();
    return Status::kDone;
  }
  TileConfig config;
  std::memset(&config, 0, sizeof config);
  config.palette = memory[0];
  config.start_row = memory[1];
  bool valid = config.palette == 1 && all_zero(memory + 2, 14) && all_zero(memory + 32, 16) &&
               all_zero(memory + 56, 8);
  for (unsigned t = 0; t < kTiles; ++t) {
    std::memcpy(&config.colsb[t], memory + 16 + 2 * t, 2);
    config.rows[t] = memory[48 + t];
    valid = valid && config.colsb[t] <= kBytesPerRow && config.rows[t] <= kMaxRows &&
            (config.colsb[t] == 0) == (config.rows[t] == 0);
  }
  if (!valid) return Status::kInvalid;  // #GP on hardware
  reset_tiles();
  tls_tiles.config = config;
  return Status::kDone;
}

Status store_config(Operation& op) {
  std::uint8_t memory[kConfigBytes] = {};
  if (configured()) {
    const TileConfig& config = tls_tiles.config;
    memory[0] = config.palette;
    memory[1] = config.start_row;
    for (unsigned t = 0; t < kTiles; ++t) {
      std::memcpy(memory + 16 + 2 * t, &config.colsb[t], 2);
      memory[48 + t] = config.rows[t];
    }
  }
  write_memory(op.address(0), memory, kConfigBytes);
  return Status::kDone;
}

Status release(Operation&) {
  reset_tiles();
  return Status::kDone;
}

// --- data movement ----------------------------------------------------------------------

Status zero_tile(Operation& op) {
  const unsigned tile = op.register_index(0);
  if (!usable(tile)) return Status::kInvalid;
  zero_rows_from(tile, 0);
  tls_tiles.config.start_row = 0;
  return Status::kDone;
}

Status load_tile(Operation& op) {
  const unsigned tile = op.register_index(0);
  if (!usable(tile)) return Status::kInvalid;
  const std::uint64_t row0 = op.base_plus_displacement(1), stride = op.scaled_index(1);
  const unsigned rows = rows_of(tile), colsb = colsb_of(tile);
  std::uint8_t row_bytes[kBytesPerRow];
  for (unsigned row = tls_tiles.config.start_row; row < rows; ++row) {
    read_memory(row0 + row * stride, row_bytes, colsb);
    write_row(tile, row, row_bytes, colsb);
  }
  zero_rows_from(tile, rows);
  tls_tiles.config.start_row = 0;
  return Status::kDone;
}

Status store_tile(Operation& op) {
  const unsigned tile = op.register_index(1);
  if (!usable(tile)) return Status::kInvalid;
  const std::uint64_t row0 = op.base_plus_displacement(0), stride = op.scaled_index(0);
  for (unsigned row = tls_tiles.config.start_row; row < rows_of(tile); ++row)
    write_memory(row0 + row * stride, tls_tiles.data[tile][row], colsb_of(tile));
  tls_tiles.config.start_row = 0;
  return Status::kDone;
}

// --- dot products -----------------------------------------------------------------------

// C (dest, M x N dwords) += A (src1, M x K dword groups) * B (src2, K rows x N dwords):
// the three tiles distinct and usable, every colsb a multiple of 4,
// B.colsb == C.colsb, B.rows == A.colsb / 4, A.rows == C.rows. Otherwise #UD.
struct Product {
  unsigned dest, a, b;
  unsigned m, n, k;  // C rows, C dword columns, A dword columns (= B rows)
};

bool shape_product(const Operation& op, Product* p) {
  p->dest = op.register_index(0);
  p->a = op.register_index(1);
  p->b = op.register_index(2);
  if (!usable(p->dest) || !usable(p->a) || !usable(p->b)) return false;
  if (p->dest == p->a || p->dest == p->b || p->a == p->b) return false;
  const unsigned c_colsb = colsb_of(p->dest), a_colsb = colsb_of(p->a), b_colsb = colsb_of(p->b);
  if (c_colsb % 4 || a_colsb % 4 || b_colsb % 4) return false;
  if (b_colsb != c_colsb || rows_of(p->b) != a_colsb / 4 || rows_of(p->a) != rows_of(p->dest))
    return false;
  p->m = rows_of(p->dest);
  p->n = c_colsb / 4;
  p->k = a_colsb / 4;
  return true;
}

template <typename T>
T tile_element(unsigned tile, unsigned row, unsigned index) {
  T value;
  std::memcpy(&value, tls_tiles.data[tile][row] + index * sizeof(T), sizeof(T));
  return value;
}

void finish_product(const Product& p, unsigned row, const void* result) {
  write_row(p.dest, row, result, p.n * 4);
  if (row + 1 == p.m) {
    zero_rows_from(p.dest, p.m);
    tls_tiles.config.start_row = 0;
  }
}

// tdpb{s,u}{s,u}d: each dword of C accumulates, with int32 wrap-around, the byte dot
// products of A's row dword k with B's row k dword n (A bytes signed if kSignedA, ...).
template <bool kSignedA, bool kSignedB>
Status dot_product_bytes(Operation& op) {
  Product p;
  if (!shape_product(op, &p)) return Status::kInvalid;
  for (unsigned m = 0; m < p.m; ++m) {
    std::uint32_t acc[kBytesPerRow / 4];
    for (unsigned n = 0; n < p.n; ++n) acc[n] = tile_element<std::uint32_t>(p.dest, m, n);
    for (unsigned k = 0; k < p.k; ++k) {
      const std::uint8_t* a = tls_tiles.data[p.a][m] + 4 * k;
      for (unsigned n = 0; n < p.n; ++n) {
        const std::uint8_t* b = tls_tiles.data[p.b][k] + 4 * n;
        std::int32_t sum = 0;
        for (unsigned j = 0; j < 4; ++j) {
          const std::int32_t x = kSignedA ? static_cast<std::int8_t>(a[j]) : a[j];
          const std::int32_t y = kSignedB ? static_cast<std::int8_t>(b[j]) : b[j];
          sum += x * y;
        }
        acc[n] += static_cast<std::uint32_t>(sum);
      }
    }
    finish_product(p, m, acc);
  }
  return Status::kDone;
}

float bf16_to_float(std::uint16_t b) {
  return from_bits<float>(std::uint32_t{b} << 16);
}
float flush(float x) {
  return denormal_as_zero(x, true);
}

// tdpbf16ps, as the SDM pseudo-code: per row, the even and the odd bf16 products are
// summed over k separately (FMA each), then C += even + odd. DAZ, FTZ, round to nearest
// even; MXCSR neither consulted nor updated.
Status dot_product_bf16(Operation& op) {
  Product p;
  if (!shape_product(op, &p)) return Status::kInvalid;
  op.suppress_float_flags();
  set_host_mxcsr(kMxcsrMasks | kMxcsrDaz | kMxcsrFtz);
  for (unsigned m = 0; m < p.m; ++m) {
    float partial[kBytesPerRow / 2] = {};
    for (unsigned k = 0; k < p.k; ++k) {
      for (unsigned n = 0; n < p.n; ++n) {
        for (unsigned half = 0; half < 2; ++half) {
          const float x = flush(bf16_to_float(tile_element<std::uint16_t>(p.a, m, 2 * k + half)));
          const float y = flush(bf16_to_float(tile_element<std::uint16_t>(p.b, k, 2 * n + half)));
          float& sum = partial[2 * n + half];
          sum = flush(std::fma(x, y, sum));
        }
      }
    }
    float result[kBytesPerRow / 4];
    for (unsigned n = 0; n < p.n; ++n) {
      const float pair = flush(partial[2 * n] + partial[2 * n + 1]);
      result[n] = flush(flush(tile_element<float>(p.dest, m, n)) + pair);
    }
    finish_product(p, m, result);
  }
  return Status::kDone;
}

constexpr OpEntry kOps[] = {
    {ZYDIS_MNEMONIC_LDTILECFG, load_config},
    {ZYDIS_MNEMONIC_STTILECFG, store_config},
    {ZYDIS_MNEMONIC_TILERELEASE, release},
    {ZYDIS_MNEMONIC_TILEZERO, zero_tile},
    {ZYDIS_MNEMONIC_TILELOADD, load_tile},
    {ZYDIS_MNEMONIC_TILELOADDT1, load_tile},
    {ZYDIS_MNEMONIC_TILESTORED, store_tile},
    {ZYDIS_MNEMONIC_TDPBSSD, dot_product_bytes<true, true>},
    {ZYDIS_MNEMONIC_TDPBSUD, dot_product_bytes<true, false>},
    {ZYDIS_MNEMONIC_TDPBUSD, dot_product_bytes<false, true>},
    {ZYDIS_MNEMONIC_TDPBUUD, dot_product_bytes<false, false>},
    {ZYDIS_MNEMONIC_TDPBF16PS, dot_product_bf16},
};

}  // namespace

std::span<const OpEntry> amx_ops() {
  return kOps;
}

}  // namespace qforge::emulate
