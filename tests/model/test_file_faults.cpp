// A model file that another process truncates while qforge has it mapped: reading a page
// past the new end raises SIGBUS, which qforge turns into an error naming the file (exit
// status 1); a SIGBUS that is not a mapped file's still ends the process as a signal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>

#include "model/format/mapped_file.h"
#include "model/format/model_file.h"
#include "model/runtime/llama_weights.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

// Opens a copy of `shipped`, truncates the copy to `keep` of its size while it is mapped,
// then builds the weights, which reads every tensor.
void build_after_truncation(const std::string& shipped, double keep) {
  const test::ScratchDir dir;
  const std::string copy = dir.file(std::filesystem::path(shipped).filename().string());
  std::filesystem::copy_file(shipped, copy);
  const ModelFile file = open_model(copy);
  const auto size = std::filesystem::file_size(copy);
  if (::truncate(copy.c_str(), static_cast<off_t>(static_cast<double>(size) * keep)) != 0) _exit(3);
  const LlamaWeights weights = build_llama_weights(file, parse_precision("int8"), 2);
  _exit(weights.layers.empty() ? 4 : 0);  // reached only if the truncation went unnoticed
}

class FileFaults : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(FileFaults, AGgufTruncatedWhileMappedEndsWithAnErrorNamingTheFile) {
  EXPECT_EXIT(build_after_truncation(test::model_path("stories260K/stories260K.gguf"), 0.5),
              ::testing::ExitedWithCode(1),
              "qforge: error: .*stories260K.gguf: the file shrank while it was mapped \\(it had "
              "1185376 bytes when opened; byte [0-9]+ is gone\\)");
}

TEST_F(FileFaults, ALlama2cCheckpointTruncatedWhileMappedEndsWithAnErrorNamingTheFile) {
  EXPECT_EXIT(build_after_truncation(test::model_path("stories260K/stories260K.bin"), 0.3),
              ::testing::ExitedWithCode(1), "stories260K.bin: the file shrank while it was mapped");
}

// A SIGBUS that is no mapped file's goes to the handler there before the guard's (with
// AddressSanitizer, its report), else ends the process as the signal.
void raise_sigbus_with_a_mapping() {
  const MappedFile mapped(test::model_path("stories260K/stories260K.gguf"));  // guard on
  std::raise(SIGBUS);
  _exit(0);
}

TEST_F(FileFaults, AnotherSigbusStillEndsTheProcessAsBefore) {
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_DEATH(raise_sigbus_with_a_mapping(), "AddressSanitizer: BUS");
#else
  EXPECT_EXIT(raise_sigbus_with_a_mapping(), ::testing::KilledBySignal(SIGBUS), "");
#endif
}

TEST_F(FileFaults, AMappingReleasedIsNoLongerGuarded) {
  // The guard's slots are reused: many files opened and closed in turn keep working.
  for (int i = 0; i < 200; ++i) {
    const MappedFile mapped(test::model_path("stories260K/stories260K.gguf"));
    ASSERT_EQ(mapped.size(), 1185376u);
  }
  EXPECT_EXIT(build_after_truncation(test::model_path("stories260K/stories260K.gguf"), 0.5),
              ::testing::ExitedWithCode(1), "the file shrank while it was mapped");
}

}  // namespace
}  // namespace qforge
