// CPU detection checked against the kernel's own view (/proc/cpuinfo) and the CLI's JSON.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "jit/base/error.h"
#include "jit/cpu/cpu_info.h"
#include "jit/cpu/isa.h"
#include "tests/support/run_command.h"

namespace qforge {
namespace {

std::set<std::string> proc_cpuinfo_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(Cpu, FlagsAgreeWithTheKernel) {
  const std::set<std::string> flags = proc_cpuinfo_flags();
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  const IsaFlags& f = cpu_info().isa;
  const std::pair<const char*, bool> expected[] = {{"avx2", f.avx2},
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
  for (const auto& [name, value] : expected) EXPECT_EQ(flags.count(name) == 1, value) << name;
}

TEST(Cpu, IdentityCachesAndCores) {
  const CpuInfo& cpu = cpu_info();
  EXPECT_TRUE(cpu.vendor == "GenuineIntel" || cpu.vendor == "AuthenticAMD") << cpu.vendor;
  EXPECT_GT(cpu.family, 0);
  EXPECT_GT(cpu.l2_bytes, 64u * 1024);
  EXPECT_GE(cpu.cores, 1);
  EXPECT_LE(cpu.cores, cpu.threads);
  EXPECT_FALSE(cpu.amx_reason.empty());
  if (!(cpu.isa.amx_tile && cpu.isa.amx_int8)) {
    EXPECT_FALSE(cpu.amx_usable);
  }
}

TEST(Isa, CapParsingAndMask) {
  EXPECT_EQ(parse_isa("avx-vnni"), Isa::avx_vnni);
  EXPECT_EQ(parse_isa("amx"), Isa::amx);
  try {
    parse_isa("sse9", "QFORGE_MAX_ISA");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx2|avx-vnni|avx512-vnni|amx"), std::string::npos);
  }
  const Isa saved = max_isa();
  set_max_isa(Isa::avx2);
  EXPECT_FALSE(isa_usable(Isa::avx512_vnni));
  EXPECT_FALSE(isa_usable(Isa::amx));
  EXPECT_EQ(isa_usable(Isa::avx2), cpu_info().isa.avx2);
  set_max_isa(saved);
  const IsaMask present = hardware_isa_mask(cpu_info()) | emulated_isa_mask();
  EXPECT_EQ(isa_usable(Isa::avx512_vnni),
            (present & isa_bit(Isa::avx512_vnni)) != 0 && max_isa() >= Isa::avx512_vnni);
}

TEST(InfoCommand, JsonReportsThisMachine) {
  const test::CommandResult c = test::run_command(std::string(QFORGE_BINARY) + " info --json");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const nlohmann::json j = nlohmann::json::parse(c.output);
  for (const char* key : {"vendor", "family", "model", "stepping", "isa", "amx_usable",
                          "amx_reason", "l2_bytes", "cores"})
    EXPECT_TRUE(j.contains(key)) << key;
  const std::set<std::string> flags = proc_cpuinfo_flags();
  EXPECT_EQ(j["isa"]["avx512_vnni"].get<bool>(), flags.count("avx512_vnni") == 1);
  EXPECT_EQ(j["isa"]["avx_vnni"].get<bool>(), flags.count("avx_vnni") == 1);
  EXPECT_EQ(j["isa"]["avx2"].get<bool>(), flags.count("avx2") == 1);
  EXPECT_EQ(j["amx_usable"].get<bool>(), cpu_info().amx_usable);
  if (!flags.count("amx_tile")) {
    EXPECT_FALSE(j["amx_usable"].get<bool>());
  }
  EXPECT_EQ(j["family"].get<int>(), cpu_info().family);
  EXPECT_EQ(j["l2_bytes"].get<std::uint64_t>(), cpu_info().l2_bytes);
}

TEST(InfoCommand, BadCapIsAnErrorListingTheValidNames) {
  const test::CommandResult c =
      test::run_command("QFORGE_MAX_ISA=avx1024 " + std::string(QFORGE_BINARY) + " info");
  EXPECT_NE(c.exit_code, 0);
  EXPECT_NE(c.output.find("QFORGE_MAX_ISA"), std::string::npos) << c.output;
  EXPECT_NE(c.output.find("avx2|avx-vnni|avx512-vnni|amx"), std::string::npos) << c.output;
  const test::CommandResult capped =
      test::run_command("QFORGE_MAX_ISA=avx2 " + std::string(QFORGE_BINARY) + " info --json");
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_EQ(nlohmann::json::parse(capped.output)["max_isa"], "avx2");
}

}  // namespace
}  // namespace qforge
