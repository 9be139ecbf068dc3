// qforge dump-asm --n N --k K [...]: generates the GEMM/GEMV kernel for one shape (without
// running it, so any ISA can be dumped on any x86 CPU) and prints its name, key, blocking,
// register plan, size and generation time, then the Intel-syntax listing with the
// generator's marks. --raw DIR also writes DIR/<kernel>.bin (the instruction stream) and
// DIR/<kernel>.json (key, blocking, sizes, marks).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "jit/base/error.h"
#include "jit/dump/disassembler.h"
#include "jit/gemm/gemm_generator.h"
#include "jit/gemm/register_budget.h"
#include "ops/linear/quantized_linear.h"
#include "ops/quant/packed_layout.h"

namespace qforge::cli {
namespace {

struct Options {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t group = 0;
  std::int64_t m = 1;
  int bits = 8;
  std::string scheme = "sym";
  std::string isa;
  std::string epilogue = "f32";
  Blocking blocking;
  CLI::Option* mr = nullptr;  // the blocking options, to tell which were given
  CLI::Option* nr = nullptr;
  CLI::Option* k_unroll = nullptr;
  CLI::Option* prefetch = nullptr;
  std::string raw_dir;
};

constexpr std::string_view kEpilogueNames = "f32|bias|residual|swiglu|u8|bias-residual";

Epilogue parse_epilogue_option(const std::string& name) {
  Epilogue e;
  if (name == "bias" || name == "bias-residual") e.bias = true;
  if (name == "residual" || name == "bias-residual") e.residual = true;
  if (name == "swiglu") e.swiglu = true;
  if (name == "u8") e.output = OutputKind::u8;
  QF_REQUIRE(e.bias || e.residual || e.swiglu || name == "u8" || name == "f32", "--epilogue: '",
             name, "' is not one of ", kEpilogueNames);
  return e;
}

Isa parse_isa_option(const std::string& name) {
  if (name.empty()) return std::clamp(best_isa(), Isa::avx2, Isa::avx512_vnni);
  QF_REQUIRE(name == "avx2" || name == "avx-vnni" || name == "avx512-vnni", "--isa: '", name,
             "' has no GEMM generator (valid: avx2|avx-vnni|avx512-vnni)");
  return parse_isa(name, "--isa");
}

QuantScheme scheme_of_options(const Options& o) {
  QF_REQUIRE(o.bits == 8 || o.bits == 4, "--bits must be 8 or 4, got ", o.bits);
  QF_REQUIRE(o.scheme == "sym" || o.scheme == "asym", "--scheme: '", o.scheme,
             "' is not one of sym|asym");
  const int quad = o.bits == 8 ? 4 : 8;
  QF_REQUIRE(o.group >= 0 && o.group % quad == 0 && o.group <= kMaxGroup,
             "--group must be 0 (per-channel) or a positive multiple of ", quad, " up to ",
             kMaxGroup, " for ", o.bits, "-bit weights, got ", o.group);
  QuantScheme scheme;
  scheme.bits = o.bits;
  scheme.asymmetric = o.scheme == "asym";
  scheme.granularity = o.group == 0 ? Granularity::per_channel : Granularity::per_group;
  scheme.group = static_cast<int>(o.group);
  return scheme;
}

Blocking blocking_of_options(const Options& o, const GemmKey& key) {
  Blocking b = default_blocking(key);
  if (o.mr->count()) b.mr = o.blocking.mr;
  if (o.nr->count()) b.nr = o.blocking.nr;
  if (o.k_unroll->count()) b.k_unroll = o.blocking.k_unroll;
  if (o.prefetch->count()) b.prefetch_distance = o.blocking.prefetch_distance;
  QF_REQUIRE(b.mr >= 1, "--mr must be positive, got ", b.mr);
  QF_REQUIRE(b.nr >= 1, "--nr must be positive, got ", b.nr);
  QF_REQUIRE(b.k_unroll >= 1, "--k-unroll must be positive, got ", b.k_unroll);
  QF_REQUIRE(b.prefetch_distance >= 0, "--prefetch must be >= 0, got ", b.prefetch_distance);
  const RegisterPlan plan = plan_registers(key, b);
  QF_REQUIRE(fits(key, b), "--mr ", b.mr, " --nr ", b.nr, ": the tile needs ", plan.total(),
             " vector registers (", plan.accumulators, " accumulators) but ", isa_name(key.isa),
             " has ", vector_isa_of(key.isa).registers, ", of which ", kEpilogueTemps,
             " must stay free for the epilogue");
  return b;
}

GemmKey key_of_options(const Options& o) {
  QF_REQUIRE(o.n > 0, "--n must be positive, got ", o.n);
  QF_REQUIRE(o.k > 0, "--k must be positive, got ", o.k);
  QF_REQUIRE(o.m > 0, "--m must be positive, got ", o.m);
  const Isa isa = parse_isa_option(o.isa);
  const Epilogue epilogue = parse_epilogue_option(o.epilogue);
  QF_REQUIRE(o.group != 0 || o.k <= kMaxGroup, "--group 0 (per-channel) needs K <= ", kMaxGroup,
             " (int32 accumulator bound), got K = ", o.k, "; pass a group size");
  const PackedHeader header = make_packed_header(o.n, o.k, scheme_of_options(o), epilogue.swiglu);
  GemmKey key = gemm_key_for(header, epilogue, isa, o.m);
  key.blocking = blocking_of_options(o, key);
  return key;
}

nlohmann::json key_json(const GemmKey& key) {
  return {{"isa", std::string(isa_name(key.isa))},
          {"n", key.n},
          {"k", key.k},
          {"k_padded", key.k_padded},
          {"group", key.group},
          {"per_channel", key.group == key.k_padded},
          {"bits", key.bits},
          {"scheme", key.asymmetric ? "asym" : "sym"},
          {"epilogue", epilogue_name(key.epilogue)},
          {"bucket", bucket_name(key.bucket)},
          {"version", key.version}};
}

nlohmann::json blocking_json(const Blocking& b) {
  return {{"mr", b.mr},
          {"nr", b.nr},
          {"k_unroll", b.k_unroll},
          {"prefetch_distance", b.prefetch_distance}};
}

// Writes under a temporary name, then renames: readers never see a half-written file.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes) {
  std::filesystem::path temp = path;
  temp += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(temp, ignored);
      fail("--raw: cannot write ", path.string());
    }
  }
  std::error_code error;
  std::filesystem::rename(temp, path, error);
  QF_REQUIRE(!error, "--raw: cannot rename ", temp.string(), " to ", path.string(), ": ",
             error.message());
}

struct DumpResult {
  std::span<const std::uint8_t> code;
  std::size_t stream_size = 0;
  Disassembly disassembly;
  double generation_us = 0;
};

void write_raw(const std::string& dir, const GemmKey& key, const std::vector<CodeMark>& marks,
               const DumpResult& dump) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  QF_REQUIRE(!error, "--raw: cannot create directory ", dir, ": ", error.message());
  const std::string name = kernel_name(key);
  const auto stream = dump.code.first(dump.stream_size);
  write_file_atomically(std::filesystem::path(dir) / (name + ".bin"),
                        {reinterpret_cast<const char*>(stream.data()), stream.size()});
  nlohmann::json marks_json = nlohmann::json::array();
  for (const CodeMark& m : marks) marks_json.push_back({{"offset", m.offset}, {"label", m.label}});
  const nlohmann::json info = {{"kernel", name},
                               {"key", key_json(key)},
                               {"blocking", blocking_json(key.blocking)},
                               {"code_size", dump.stream_size},
                               {"data_bytes", dump.code.size() - dump.stream_size},
                               {"instruction_count", dump.disassembly.instruction_count},
                               {"generation_us", dump.generation_us},
                               {"marks", marks_json}};
  write_file_atomically(std::filesystem::path(dir) / (name + ".json"), info.dump(2) + "\n");
}

void print_header(const GemmKey& key, const DumpResult& dump) {
  const Blocking& b = key.blocking;
  const RegisterPlan plan = plan_registers(key, b);
  const std::string group =
      key.group == key.k_padded ? std::string("per-channel") : std::to_string(key.group);
  std::printf("; kernel     %s\n", kernel_name(key).c_str());
  std::printf("; key        isa %s, N %lld, K %lld (Kp %lld), g %s, int%d %s, %s, M bucket %s\n",
              std::string(isa_name(key.isa)).c_str(), static_cast<long long>(key.n),
              static_cast<long long>(key.k), static_cast<long long>(key.k_padded), group.c_str(),
              key.bits, key.asymmetric ? "asym" : "sym", epilogue_name(key.epilogue).c_str(),
              bucket_name(key.bucket));
  std::printf("; blocking   %d x %d units (MR x NR), k_unroll %d, prefetch %d bytes\n", b.mr, b.nr,
              b.k_unroll, b.prefetch_distance);
  std::printf("; registers  %d accumulators, %d float sums%s, %d weights, %d fixed: %d of %d\n",
              plan.accumulators, plan.float_sums,
              plan.float_sums_in_memory ? " (sums in the stack frame)" : "", plan.weights,
              plan.fixed, plan.total(), vector_isa_of(key.isa).registers);
  std::printf("; code       %zu bytes of instructions (%zu instructions) + %zu bytes of data\n",
              dump.stream_size, dump.disassembly.instruction_count,
              dump.code.size() - dump.stream_size);
  std::printf("; generated  in %.1f us\n", dump.generation_us);
}

void run(const Options& o) {
  const GemmKey key = key_of_options(o);
  const auto start = std::chrono::steady_clock::now();
  const GemmGenerator generator(key);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  DumpResult dump;
  dump.code = {generator.getCode(), generator.getSize()};
  dump.stream_size = instruction_stream_size(dump.code, generator.marks());
  dump.disassembly = disassemble(dump.code, dump.stream_size, generator.marks());
  dump.generation_us = std::chrono::duration<double, std::micro>(elapsed).count();
  if (!o.raw_dir.empty()) write_raw(o.raw_dir, key, generator.marks(), dump);
  print_header(key, dump);
  std::fputs(dump.disassembly.listing.c_str(), stdout);
}

}  // namespace

void register_dump_asm(CLI::App& app) {
  auto* cmd = app.add_subcommand("dump-asm", "Generate one GEMM kernel and print its assembly");
  auto o = std::make_shared<Options>();
  cmd->add_option("--n", o->n, "Output columns N")->required();
  cmd->add_option("--k", o->k, "Input length K")->required();
  cmd->add_option("--group", o->group, "Group size g along K (0 = per-channel)");
  cmd->add_option("--bits", o->bits, "Weight bits (8|4)");
  cmd->add_option("--scheme", o->scheme, "Weight quantization (sym|asym)");
  cmd->add_option("--m", o->m, "Rows M the kernel is tuned for (picks the M bucket)");
  cmd->add_option("--isa", o->isa, "Kernel ISA (avx2|avx-vnni|avx512-vnni; default: best here)");
  cmd->add_option("--epilogue", o->epilogue, "Epilogue (" + std::string(kEpilogueNames) + ")");
  o->mr = cmd->add_option("--mr", o->blocking.mr, "Rows per register tile (MR)");
  o->nr = cmd->add_option("--nr", o->blocking.nr, "16-column units per register tile (NR)");
  o->k_unroll = cmd->add_option("--k-unroll", o->blocking.k_unroll, "Packed rows per K step");
  o->prefetch = cmd->add_option("--prefetch", o->blocking.prefetch_distance,
                                "Prefetch distance in bytes (0 = none)");
  cmd->add_option("--raw", o->raw_dir,
                  "Also write <kernel>.bin and <kernel>.json to this directory");
  cmd->callback([o] { run(*o); });
}

}  // namespace qforge::cli
