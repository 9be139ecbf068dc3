// qforge dump-asm --n N --k K [...]: generates the GEMM/GEMV kernel for one shape (without
// running it, so any ISA can be dumped on any x86 CPU) and prints its name, key, blocking,
// register plan, size and generation time, then the Intel-syntax listing with the
// generator's marks. --raw DIR also writes DIR/<kernel>.bin (the instruction stream) and
// DIR/<kernel>.json (key, blocking, sizes, marks). --isa amx dumps the AMX tile kernel, with
// the tile configuration it loads for --m rows (default 32) in place of the register plan.
//
// dump-asm -m MODEL [--quant Q] [--list] [--layer NAME] [--m M]: loads the model (packing
// and generating as `run` does), lists the distinct kernels its layers call for M rows
// and which layers call each; --layer dumps that layer's kernel as above.
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
#include "cli/model_kernels.h"
#include "cli/model_options.h"
#include "jit/base/error.h"
#include "jit/core/code_cache.h"
#include "jit/dump/disassembler.h"
#include "jit/gemm/amx_tile_plan.h"
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
  std::string activation = "s8";
  Blocking blocking;
  CLI::Option* m_option = nullptr;
  CLI::Option* mr = nullptr;  // the blocking options, to tell which were given
  CLI::Option* nr = nullptr;
  CLI::Option* k_unroll = nullptr;
  CLI::Option* prefetch = nullptr;
  std::string raw_dir;
  // A model's kernels instead of one shape.
  ModelOptions model;
  bool list = false;
  std::string layer;
};

constexpr std::string_view kEpilogueNames = "f32|bias|residual|swiglu|u8|bias-residual";
constexpr std::int64_t kAmxDefaultRows = 32;  // one full block of tiles

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
  QF_REQUIRE(name == "avx2" || name == "avx-vnni" || name == "avx512-vnni" || name == "amx",
             "--isa: '", name, "' has no GEMM generator (valid: avx2|avx-vnni|avx512-vnni|amx)");
  return parse_isa(name, "--isa");
}

QuantScheme scheme_of_options(const Options& o) {
  QF_REQUIRE(o.bits == 8 || o.bits == 5 || o.bits == 4, "--bits must be 8, 5 or 4, got ", o.bits);
  QF_REQUIRE(o.scheme == "sym" || o.scheme == "asym", "--scheme: '", o.scheme,
             "' is not one of sym|asym");
  const int quad = o.bits == 8 ? 4 : o.bits == 5 ? kBitPlaneK : 8;
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
  if (key.isa == Isa::amx) {
    for (const CLI::Option* given : {o.mr, o.nr, o.k_unroll, o.prefetch})
      QF_REQUIRE(!given->count(), given->get_name(),
                 ": the AMX kernel's blocking is fixed (blocks of 32 rows x 2 panels of tiles)");
    return amx_blocking(key);
  }
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

std::int64_t rows_of_options(const Options& o, Isa isa) {
  return isa == Isa::amx && !o.m_option->count() ? kAmxDefaultRows : o.m;
}

GemmKey key_of_options(const Options& o) {
  QF_REQUIRE(o.n > 0, "--n must be positive, got ", o.n);
  QF_REQUIRE(o.k > 0, "--k must be positive, got ", o.k);
  QF_REQUIRE(o.m > 0, "--m must be positive, got ", o.m);
  const Isa isa = parse_isa_option(o.isa);
  QF_REQUIRE(isa != Isa::amx || amx_step_k(o.group) != 0, "--group ", o.group,
             ": the AMX kernel takes groups that are multiples of ", kAmxHalfTileK,
             " (or 0, per-channel)");
  const Epilogue epilogue = parse_epilogue_option(o.epilogue);
  QF_REQUIRE(o.group != 0 || o.k <= kMaxGroup, "--group 0 (per-channel) needs K <= ", kMaxGroup,
             " (int32 accumulator bound), got K = ", o.k, "; pass a group size");
  const PackedHeader header = make_packed_header(o.n, o.k, scheme_of_options(o), epilogue.swiglu);
  const ActivationKind activation = parse_activation(o.activation, "--activation");
  QF_REQUIRE(activation != ActivationKind::f32 || isa != Isa::amx, "--activation ", o.activation,
             ": weight-only f32 kernels run on zmm or ymm, not on AMX tiles (bf16 with "
             "--bits 4 does: tdpbf16ps)");
  GemmKey key = gemm_key_for(header, epilogue, isa, rows_of_options(o, isa), activation);
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
          {"activation", activation_name(key.activation)},
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

void print_tiles(const GemmKey& key, std::int64_t m) {
  const int rows = amx_block_rows(m);
  if (key.activation == ActivationKind::bf16)
    std::printf(
        "; tiles      blocks of R rows x 2 panels: C tmm0-3 f32, A tmm4-5 bf16 (x pairs), "
        "B tmm6-7 bf16 pairs (int4 looked up on the stack); K steps of %d\n",
        amx_step_k(key));
  else
    std::printf(
        "; tiles      blocks of R rows x 2 panels: C tmm0-3 int32, A tmm4-5 s8 (xq), "
        "B tmm6-7 u8 (packed rows%s); K steps of %d\n",
        key.bits == 4   ? ", int4 unpacked on the stack"
        : key.bits == 5 ? ", int5 unpacked on the stack"
                        : "",
        amx_step_k(key));
  std::printf("; tile cfg   M %lld -> R %d: %s\n", static_cast<long long>(m), rows,
              describe_tile_config(amx_tile_config(rows, amx_step_bytes(key))).c_str());
  std::printf(
      ";            (the kernel holds one configuration per R = 1..%d and loads the one "
      "for its M when the thread's live configuration differs)\n",
      kAmxBlockRows);
}

void print_header(const GemmKey& key, std::int64_t m, const DumpResult& dump) {
  const Blocking& b = key.blocking;
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
  if (key.isa == Isa::amx) {
    print_tiles(key, m);
  } else {
    const RegisterPlan plan = plan_registers(key, b);
    std::printf("; registers  %d accumulators, %d float sums%s, %d weights, %d fixed: %d of %d\n",
                plan.accumulators, plan.float_sums,
                plan.float_sums_in_memory ? " (sums in the stack frame)" : "", plan.weights,
                plan.fixed, plan.total(), vector_isa_of(key.isa).registers);
  }
  std::printf("; code       %zu bytes of instructions (%zu instructions) + %zu bytes of data\n",
              dump.stream_size, dump.disassembly.instruction_count,
              dump.code.size() - dump.stream_size);
  std::printf("; generated  in %.1f us\n", dump.generation_us);
}

void dump_key(const Options& o, const GemmKey& key, std::int64_t m) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<const GemmGenerator> code = generate_kernel(key);
  const GemmGenerator& generator = *code;
  const auto elapsed = std::chrono::steady_clock::now() - start;
  DumpResult dump;
  dump.code = {generator.getCode(), generator.getSize()};
  dump.stream_size = instruction_stream_size(dump.code, generator.marks());
  dump.disassembly = disassemble(dump.code, dump.stream_size, generator.marks());
  dump.generation_us = std::chrono::duration<double, std::micro>(elapsed).count();
  if (!o.raw_dir.empty()) write_raw(o.raw_dir, key, generator.marks(), dump);
  print_header(key, m, dump);
  std::fputs(dump.disassembly.listing.c_str(), stdout);
}

void run(const Options& o) {
  if (o.model.model.empty()) {
    QF_REQUIRE(o.n > 0 && o.k > 0, "dump-asm: give --n and --k (one kernel) or -m MODEL");
    const GemmKey key = key_of_options(o);
    dump_key(o, key, rows_of_options(o, key.isa));
    return;
  }
  QF_REQUIRE(o.isa.empty(),
             "dump-asm: with -m the kernels are the ones this CPU runs; cap "
             "them with QFORGE_MAX_ISA instead of --isa");
  const int threads = apply_model_options(o.model).threads;
  const Precision precision = model_precision(o.model);
  QF_REQUIRE(precision.quantized, "dump-asm: --quant ", o.model.quant,
             " runs every layer on oneDNN; there are no generated kernels to show");
  auto session = open_model_session(o.model, precision, threads, 1);
  const LlamaWeights& weights = session->model.weights;
  if (o.layer.empty() || o.list) print_model_kernels(model_kernels(weights, o.m), o.m);
  if (!o.layer.empty()) {
    if (o.list) std::printf("\n");
    dump_key(o, model_layer_key(weights, o.layer, o.m), o.m);
  }
}

}  // namespace

void register_dump_asm(CLI::App& app) {
  auto* cmd = app.add_subcommand("dump-asm", "Generate one GEMM kernel and print its assembly");
  auto o = std::make_shared<Options>();
  cmd->add_option("--n", o->n, "Output columns N (one kernel)");
  cmd->add_option("--k", o->k, "Input length K (one kernel)");
  cmd->add_option("--group", o->group, "Group size g along K (0 = per-channel)");
  cmd->add_option("--bits", o->bits, "Weight bits (8|5|4)");
  cmd->add_option("--scheme", o->scheme, "Weight quantization (sym|asym)");
  o->m_option = cmd->add_option("--m", o->m,
                                "Rows M the kernel is tuned for (picks the M bucket; amx: the "
                                "tile configuration shown; default 1, amx 32)");
  cmd->add_option("--isa", o->isa,
                  "Kernel ISA (avx2|avx-vnni|avx512-vnni|amx; default: best vector ISA here)");
  cmd->add_option("--epilogue", o->epilogue, "Epilogue (" + std::string(kEpilogueNames) + ")");
  cmd->add_option("--activation", o->activation,
                  "Activation operand: s8 (W8A8 / W4A8, default) | f32 (weight-only) | bf16 "
                  "(weight-only int4 on avx512-vnni: vdpbf16ps; on amx: tdpbf16ps) | s8x2, "
                  "s8x3 (weight-only decode: one row split into 2 or 3 s8 digit rows, a tile "
                  "of them)");
  o->mr = cmd->add_option("--mr", o->blocking.mr, "Rows per register tile (MR)");
  o->nr = cmd->add_option("--nr", o->blocking.nr, "16-column units per register tile (NR)");
  o->k_unroll = cmd->add_option("--k-unroll", o->blocking.k_unroll, "Packed rows per K step");
  o->prefetch = cmd->add_option("--prefetch", o->blocking.prefetch_distance,
                                "Prefetch distance in bytes (0 = none)");
  cmd->add_option("--raw", o->raw_dir,
                  "Also write <kernel>.bin and <kernel>.json to this directory");
  cmd->add_option("-m,--model", o->model.model, "A model: list (or dump) the kernels it runs");
  cmd->add_option("--quant", o->model.quant, "With -m: the precision (default native)");
  cmd->add_option("-t,--threads", o->model.threads, "With -m: threads for packing");
  cmd->add_option("--tokenizer", o->model.tokenizer, "With -m: llama2.c tokenizer.bin");
  cmd->add_flag("--list", o->list, "With -m: list the model's kernels (the default)");
  cmd->add_option("--layer", o->layer,
                  "With -m: dump the kernel of this layer (blk.0.ffn_down, output, ...) or "
                  "kernel name");
  cmd->callback([o] { run(*o); });
}

}  // namespace qforge::cli
