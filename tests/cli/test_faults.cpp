// Faults from the machine rather than the input: a memory limit that cannot hold the
// weights, and outputs (quantize -o, tune --out, calibrate -o) onto a file system that is
// full, read-only or refuses to grow a file. Each must end with a clear error, exit 1,
// no partial file, and the old file intact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/model_paths.h"
#include "tests/support/run_command.h"

namespace qforge {
namespace {

const std::string kQforge = QFORGE_BINARY;

std::string stories() {
  return test::model_path("stories260K/stories260K.gguf");
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class ScratchDirectory {
 public:
  explicit ScratchDirectory(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              ("qforge-faults-" + std::to_string(::getpid()) + "-" + name)) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs `command` in bash with `limits` set first (ulimit lines), under a 5-minute timeout:
// a hang counts as a failure.
test::CommandResult run_limited(const std::string& limits, const std::string& command) {
  return test::run_command("timeout 300 bash -c '" + limits + "; exec " + command + "'");
}

// ---- memory ----

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;  // its shadow memory cannot live under ulimit -v
#else
constexpr bool kAddressSanitizer = false;
#endif

TEST(MemoryLimit, EveryLimitEndsInAnswersOrAClearErrorNamingTheSize) {
  if (kAddressSanitizer) GTEST_SKIP() << "ulimit -v and AddressSanitizer exclude each other";
  const ScratchDirectory dir("memory");
  // 120 MiB of f32 weights, dense: a limit can hold the mapping but not the weights.
  const std::string model = (dir.path() / "f32.gguf").string();
  const auto made = test::run_command(
      kQforge + " synth --preset dim=512,hidden=1536,layers=8,heads=8,kv-heads=8,vocab=4096" +
      " --type f32 -o " + model);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  const std::string run = kQforge + " run -m " + model + " -p hi -n 2 --temp 0 -t 2 --quant f32";
  // What a refusal must say: the memory it needed, a number of bytes or MiB.
  const auto names_a_size = [](const std::string& output) {
    const std::size_t error = output.find("qforge: error: ");
    if (error == std::string::npos) return false;
    for (const char* unit : {" MiB", " bytes"})
      for (std::size_t at = output.find(unit, error); at != std::string::npos;
           at = output.find(unit, at + 1))
        if (at > 0 && std::isdigit(static_cast<unsigned char>(output[at - 1]))) return true;
    return false;
  };
  int refusals = 0, weight_refusals = 0, started = 0;
  bool answered = false;
  for (int mib = 48; mib <= 1024 && !answered; mib += 16) {
    const std::string limit = "ulimit -v " + std::to_string(mib * 1024);
    // Below what the dynamic loader needs for the libraries nothing of qforge runs at all.
    if (run_limited(limit, kQforge + " --help").exit_code != 0) continue;
    ++started;
    const auto r = run_limited(limit, run);
    SCOPED_TRACE(limit + ": " + r.output);
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1) << "a crash, an abort or a hang";
    if (r.exit_code == 0) {
      answered = true;
      continue;
    }
    ++refusals;
    EXPECT_TRUE(names_a_size(r.output));
    if (r.output.find("not enough memory to build the weights: they need 120.0 MiB") !=
        std::string::npos)
      ++weight_refusals;
  }
  EXPECT_GT(started, 0);
  EXPECT_TRUE(answered) << "1 GiB should hold a 120 MiB model";
  EXPECT_GT(refusals, 0);
  EXPECT_GT(weight_refusals, 0) << "no limit held the mapping but not the weights";
}

// ---- outputs ----

struct Writer {
  const char* name;
  const char* output;  // the file it writes
  std::string command(const std::filesystem::path& out) const {
    const std::string text = std::string(QFORGE_SOURCE_ROOT) + "/tests/data/stories260K_eval.txt";
    const std::string o = out.string();
    if (std::string(name) == "quantize")
      return kQforge + " quantize -m " + stories() + " --quant int8 -o " + o;
    if (std::string(name) == "tune")
      return kQforge + " tune -m " + stories() + " --budget-seconds 1 --m 1 -t 1 --out " + o;
    return kQforge + " calibrate -m " + stories() + " -f " + text + " --samples 2 --ctx 32 -o " + o;
  }
};
const Writer kWriters[] = {
    {"quantize", "model.gguf"}, {"tune", "tuning.json"}, {"calibrate", "stats.qcal"}};

// The refusal names the output, says why, and leaves the directory as it was.
// `dir` holds what the command left; `named` is the output as the command was given it.
void expect_refused_and_intact(const test::CommandResult& r, const std::filesystem::path& dir,
                               const std::filesystem::path& named, const Writer& writer,
                               const std::string& why, const std::vector<std::string>& present) {
  SCOPED_TRACE(std::string(writer.name) + ": " + r.output);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("qforge: error: " + named.string() + ": "), std::string::npos);
  EXPECT_NE(r.output.find(why), std::string::npos);
  EXPECT_EQ(read_text(dir / writer.output), "old\n");
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, present) << "a partial file was left behind";
}

TEST(OutputFaults, AFileLimitLeavesNoPartialFileAndTheOldFileIntact) {
  for (const Writer& writer : kWriters) {
    const ScratchDirectory dir(std::string("fsize-") + writer.name);
    std::ofstream(dir.path() / writer.output) << "old\n";
    // The process may not grow any file: each write fails with EFBIG, as on a full disk.
    const auto r =
        run_limited("trap \"\" XFSZ; ulimit -f 0", writer.command(dir.path() / writer.output));
    expect_refused_and_intact(r, dir.path(), dir.path() / writer.output, writer, "File too large",
                              {writer.output});
  }
}

// A tmpfs of the test's own (a private mount namespace; needs root): filled up, then
// remounted read-only.
bool can_mount_tmpfs() {
  return test::run_command("unshare -m bash -c 'mount -t tmpfs -o size=64k tmpfs /tmp'")
             .exit_code == 0;
}

TEST(OutputFaults, AFullOrReadOnlyFileSystemLeavesNoPartialFileAndTheOldFileIntact) {
  if (!can_mount_tmpfs()) GTEST_SKIP() << "no private tmpfs here (unshare -m and mount need root)";
  for (const Writer& writer : kWriters) {
    for (const bool read_only : {false, true}) {
      const ScratchDirectory dir(std::string(read_only ? "ro-" : "full-") + writer.name);
      const std::string d = dir.path().string();
      const std::filesystem::path out = dir.path() / writer.output;
      // Inside the namespace: mount, write the old file, fill or remount, run, then copy
      // what is left to the real directory's "after" for the checks.
      const std::string after = d + ".after";
      std::filesystem::remove_all(after);
      std::filesystem::create_directories(after);
      const std::string fault =
          read_only ? "mount -o remount,ro tmpfs " + d
                    : "(dd if=/dev/zero of=" + d + "/filler bs=4k 2>/dev/null || true)";
      const std::string script = "mount -t tmpfs -o size=1m tmpfs " + d + " && echo old > " +
                                 out.string() + " && " + fault + " && { " + writer.command(out) +
                                 "; status=$?; cp -a " + d + "/. " + after + "; exit $status; }";
      const auto r = test::run_command("timeout 300 unshare -m bash -c '" + script + "'");
      std::vector<std::string> present = {writer.output};
      if (!read_only) present.insert(present.begin(), "filler");
      expect_refused_and_intact(r, after, out, writer,
                                read_only ? "Read-only file system" : "No space left on device",
                                present);
      std::filesystem::remove_all(after);
    }
  }
}

}  // namespace
}  // namespace qforge
