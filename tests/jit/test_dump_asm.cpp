// `qforge dump-asm`: the listing shows each ISA's dot-product instruction, the generator's
// marks, --raw files that objdump reads back with the same instruction count, and bad
// options fail naming the option.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/run_command.h"

namespace qforge::test {
namespace {

CommandResult dump_asm(const std::string& arguments) {
  return run_command(std::string(QFORGE_BINARY) + " dump-asm " + arguments);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// objdump prints "  addr:\tbytes\tinstruction" per instruction (long encodings continue
// on lines without the instruction field).
std::size_t objdump_instruction_count(const std::string& listing) {
  std::istringstream lines(listing);
  std::size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto colon_tab = line.find(":\t");
    if (colon_tab == std::string::npos) continue;
    if (line.find('\t', colon_tab + 2) != std::string::npos) ++count;
  }
  return count;
}

class ScratchDirectory {
 public:
  ScratchDirectory()
      : path_(std::filesystem::temp_directory_path() /
              ("qforge_dump_asm_" + std::to_string(getpid()))) {
    std::filesystem::remove_all(path_);
  }
  ~ScratchDirectory() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(DumpAsm, Avx512VnniUsesZmmVpdpbusd) {
  const CommandResult r = dump_asm("--n 64 --k 256 --group 128 --isa avx512-vnni");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "vpdpbusd zmm")) << r.output;
  EXPECT_TRUE(contains(r.output, "gemm_u8s8_avx512vnni_n64_k256_g128")) << r.output;
}

TEST(DumpAsm, AvxVnniUsesVexEncodedYmm) {
  const CommandResult r = dump_asm("--n 64 --k 256 --m 4 --isa avx-vnni");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "{vex} vpdpbusd ymm")) << r.output;
  EXPECT_FALSE(contains(r.output, "zmm")) << r.output;
}

TEST(DumpAsm, Avx2UsesMaddubsInsteadOfVnni) {
  const CommandResult r = dump_asm("--n 48 --k 200 --bits 4 --group 40 --scheme asym --isa avx2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "vpdpbusd")) << r.output;
  EXPECT_TRUE(contains(r.output, "vpmaddubsw")) << r.output;
}

// The AMX kernel is generated (not run), so it dumps on any x86 CPU.
TEST(DumpAsm, AmxShowsTileConfigurationAndTileInstructions) {
  const CommandResult r = dump_asm("--n 64 --k 256 --group 128 --isa amx --m 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part :
       {"gemm_u8s8_amx_n64_k256_g128_w8s_ml_32x2u1_deq-f32", "; tile cfg   M 20 -> R 20: palette 1",
        "tmm0 C 16 rows x 64 colsb", "tmm2 C 4 rows x 64 colsb", "tmm5 A 4 rows x 64 colsb",
        "tmm7 B 16 rows x 64 colsb", "; ---- tile configuration ----", "sttilecfg ", "ldtilecfg ",
        "tileloadd tmm4, ", "tileloadd tmm6, ", "tdpbsud tmm3, tmm5, tmm7", "tilestored ",
        "tilezero tmm0", ": K loop ----", ": group dequant ----", ": epilogue ----"})
    EXPECT_TRUE(contains(r.output, part)) << part << "\n" << r.output;
  EXPECT_FALSE(contains(r.output, "; registers")) << r.output;
}

TEST(DumpAsm, AmxInt4UnpacksNibblesAndDefaultsToAFullBlock) {
  const CommandResult r = dump_asm("--n 40 --k 300 --bits 4 --group 64 --scheme asym --isa amx");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "M 32 -> R 32")) << r.output;
  EXPECT_TRUE(contains(r.output, "tmm5 A 16 rows x 64 colsb")) << r.output;
  EXPECT_TRUE(contains(r.output, "vpsrlw zmm")) << r.output;
  EXPECT_TRUE(contains(r.output, "tdpbsud")) << r.output;
}

TEST(DumpAsm, ListingCarriesMarksKeyAndBlocking) {
  const CommandResult r =
      dump_asm("--n 100 --k 512 --group 64 --m 16 --isa avx512-vnni --epilogue bias-residual");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part :
       {": K loop ----", ": group dequant ----", ": epilogue ----", "; ---- tile ", "; blocking",
        "; registers", "; generated", "; data: ", "deq-bias-res-f32"})
    EXPECT_TRUE(contains(r.output, part)) << part << "\n" << r.output;
}

TEST(DumpAsm, DefaultIsaIsOneTheGeneratorServes) {
  const CommandResult r = dump_asm("--n 16 --k 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "; kernel     gemm_u8s8_")) << r.output;
}

TEST(DumpAsm, BlockingOverrideIsUsed) {
  const CommandResult r =
      dump_asm("--n 64 --k 128 --isa avx512-vnni --m 8 --mr 2 --nr 3 --k-unroll 2 --prefetch 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "_2x3u2_")) << r.output;
  EXPECT_TRUE(contains(r.output, "tile 2x3: K loop")) << r.output;
}

TEST(DumpAsm, RawFilesMatchObjdumpInstructionCount) {
  for (const char* isa : {"avx512-vnni", "avx-vnni", "avx2", "amx"}) {
    SCOPED_TRACE(isa);
    ScratchDirectory dir;
    const CommandResult r = dump_asm("--n 40 --k 320 --group 64 --m 3 --epilogue swiglu --isa " +
                                     std::string(isa) + " --raw " + dir.path().string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::filesystem::path bin, json;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      if (entry.path().extension() == ".bin") bin = entry.path();
      if (entry.path().extension() == ".json") json = entry.path();
    }
    ASSERT_FALSE(bin.empty()) << "no .bin written";
    ASSERT_FALSE(json.empty()) << "no .json written";
    EXPECT_EQ(bin.stem(), json.stem());
    EXPECT_TRUE(contains(r.output, bin.stem().string())) << r.output;

    std::ifstream json_file(json);
    const nlohmann::json info = nlohmann::json::parse(json_file);
    EXPECT_EQ(info["code_size"].get<std::uintmax_t>(), std::filesystem::file_size(bin));
    EXPECT_EQ(info["key"]["isa"], isa);
    EXPECT_FALSE(info["marks"].empty());
    EXPECT_GT(info["blocking"]["mr"].get<int>(), 0);

    const CommandResult objdump =
        run_command("objdump -D -b binary -m i386:x86-64 -M intel " + bin.string());
    ASSERT_EQ(objdump.exit_code, 0) << objdump.output;
    EXPECT_EQ(objdump_instruction_count(objdump.output),
              info["instruction_count"].get<std::size_t>());
  }
}

TEST(DumpAsm, BadOptionsFailNamingTheOption) {
  const struct {
    const char* arguments;
    const char* option;
  } cases[] = {
      {"--n 64 --k 256 --isa avx1024", "--isa"},
      {"--n 64 --k 256 --isa amx --group 40", "--group"},
      {"--n 64 --k 256 --isa amx --mr 4", "--mr"},
      {"--n 64 --k 256 --isa sse2", "--isa"},
      {"--n 64 --k 256 --scheme skewed", "--scheme"},
      {"--n 64 --k 256 --epilogue gelu", "--epilogue"},
      {"--n 64 --k 0", "--k"},
      {"--n 64 --k -5", "--k"},
      {"--n 0 --k 64", "--n"},
      {"--n 64 --k 256 --group 6", "--group"},
      {"--n 64 --k 256 --bits 4 --group 12", "--group"},
      {"--n 64 --k 256 --bits 3", "--bits"},
      {"--n 64 --k 256 --isa avx2 --m 8 --mr 8 --nr 4", "--mr"},
      {"--n 64 --k 256 --k-unroll 0", "--k-unroll"},
      {"--n 64 --k 100000", "--group"},
  };
  for (const auto& c : cases) {
    const CommandResult r = dump_asm(c.arguments);
    EXPECT_NE(r.exit_code, 0) << c.arguments;
    EXPECT_TRUE(contains(r.output, c.option)) << c.arguments << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, "qforge: error: ")) << c.arguments << "\n" << r.output;
  }
}

}  // namespace
}  // namespace qforge::test
