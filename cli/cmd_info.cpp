// qforge info [--json]: what this CPU is, which kernel ISAs qforge will use, and why not AMX.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "jit/tune/cpu_signature.h"

namespace qforge::cli {
namespace {

struct FlagRow {
  const char* name;
  bool value;
};

std::vector<FlagRow> isa_rows(const IsaFlags& f) {
  return {{"avx2", f.avx2},
          {"fma", f.fma},
          {"f16c", f.f16c},
          {"avx512f", f.avx512f},
          {"avx512bw", f.avx512bw},
          {"avx512vl", f.avx512vl},
          {"avx512dq", f.avx512dq},
          {"avx512_vnni", f.avx512_vnni},
          {"avx_vnni", f.avx_vnni},
          {"avx512_bf16", f.avx512_bf16},
          {"avx512_fp16", f.avx512_fp16},
          {"amx_tile", f.amx_tile},
          {"amx_int8", f.amx_int8},
          {"amx_bf16", f.amx_bf16}};
}

nlohmann::json to_json(const CpuInfo& cpu) {
  nlohmann::json isa = nlohmann::json::object();
  for (const auto& row : isa_rows(cpu.isa)) isa[row.name] = row.value;
  nlohmann::json kernels = nlohmann::json::array();
  for (int i = 1; i < kIsaCount; ++i)
    if (isa_usable(static_cast<Isa>(i)))
      kernels.push_back(std::string(isa_name(static_cast<Isa>(i))));
  return {{"vendor", cpu.vendor},
          {"brand", cpu.brand},
          {"family", cpu.family},
          {"model", cpu.model},
          {"stepping", cpu.stepping},
          {"isa", isa},
          {"os_ymm", cpu.isa.os_ymm},
          {"os_zmm", cpu.isa.os_zmm},
          {"os_tile", cpu.isa.os_tile},
          {"amx_usable", cpu.amx_usable},
          {"amx_reason", cpu.amx_reason},
          {"l1d_bytes", cpu.l1d_bytes},
          {"l2_bytes", cpu.l2_bytes},
          {"l3_bytes", cpu.l3_bytes},
          {"cores", cpu.cores},
          {"threads", cpu.threads},
          {"max_isa", std::string(isa_name(max_isa()))},
          {"signature", cpu_signature()},
          {"kernel_isas", kernels},
          {"best_isa", std::string(isa_name(best_isa()))}};
}

void print_text(const CpuInfo& cpu) {
  std::printf("cpu        %s (%s, family %d model %d stepping %d)\n", cpu.brand.c_str(),
              cpu.vendor.c_str(), cpu.family, cpu.model, cpu.stepping);
  std::printf("cores      %d physical, %d logical\n", cpu.cores, cpu.threads);
  std::printf("caches     L1d %llu KiB, L2 %llu KiB, L3 %llu KiB\n",
              static_cast<unsigned long long>(cpu.l1d_bytes >> 10),
              static_cast<unsigned long long>(cpu.l2_bytes >> 10),
              static_cast<unsigned long long>(cpu.l3_bytes >> 10));
  std::printf("os state   ymm %s, zmm %s, tiles %s\n", cpu.isa.os_ymm ? "yes" : "no",
              cpu.isa.os_zmm ? "yes" : "no", cpu.isa.os_tile ? "yes" : "no");
  std::printf("isa       ");
  for (const auto& row : isa_rows(cpu.isa)) std::printf(" %s%s", row.value ? "+" : "-", row.name);
  std::printf("\namx        %s (%s)\n", cpu.amx_usable ? "usable" : "not usable",
              cpu.amx_reason.c_str());
  std::printf("max isa    %s%s\n", std::string(isa_name(max_isa())).c_str(),
              max_isa() == Isa::amx ? " (no cap)" : " (capped)");
  std::printf("kernels   ");
  for (int i = 1; i < kIsaCount; ++i) {
    const Isa isa = static_cast<Isa>(i);
    std::printf(" %s%s", isa_usable(isa) ? "+" : "-", std::string(isa_name(isa)).c_str());
  }
  std::printf("\nbest       %s\n", std::string(isa_name(best_isa())).c_str());
}

}  // namespace

void register_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the CPU, its ISA flags and the kernels qforge uses");
  auto json = std::make_shared<bool>(false);
  auto cap = std::make_shared<std::string>();
  cmd->add_flag("--json", *json, "Print as JSON");
  cmd->add_option("--max-isa", *cap, "Cap the kernel ISA (" + valid_isa_names() + ")");
  cmd->callback([json, cap] {
    if (!cap->empty()) set_max_isa(parse_isa(*cap, "--max-isa"));
    const CpuInfo& cpu = cpu_info();
    if (*json)
      std::printf("%s\n", to_json(cpu).dump(2).c_str());
    else
      print_text(cpu);
  });
}

}  // namespace qforge::cli
