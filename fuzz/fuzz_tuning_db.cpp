// Tuning database JSON: any text is accepted (perhaps with entries dropped and warnings)
// or rejected with a message; never an exception or a crash. What is accepted writes
// back (save: to_json into a file) to a file that loads to the same entries.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "fuzz/fuzz_input_file.h"
#include "jit/tune/tuning_db.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The seeds' signature (fuzz/corpus/tuning_db), so that mutations of them can be accepted.
  const std::string signature = "AuthenticAMD-26-2-1_avx2.avx-vnni.avx512-vnni_c2_l2-1m";
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const qforge::TuningDbLoad load = qforge::parse_tuning_db(text, signature, "fuzz input");
  if (!load.db) {
    if (load.error.empty()) qforge::fuzz::property_failed("rejected without a message");
    return 0;
  }
  // Saved to a file (atomically) and loaded from it; merged into an empty database.
  const std::string path = qforge::fuzz::input_path("tuning.json");
  load.db->save(path);
  const qforge::TuningDbLoad reload = qforge::load_tuning_db(path, signature);
  std::filesystem::remove(path);
  qforge::TuningDb merged(signature);
  merged.merge(*load.db);
  if (merged.size() != load.db->size()) qforge::fuzz::property_failed("merged differently");
  if (!reload.db || !reload.warnings.empty() || reload.db->size() != load.db->size())
    qforge::fuzz::property_failed("written back differently");
  for (const auto& [key, tuned] : load.db->entries()) {
    const qforge::TunedKernel* other = reload.db->find(key);
    if (other == nullptr || !(other->blocking == tuned.blocking) ||
        other->amx_min_m != tuned.amx_min_m || other->gemm_min_m != tuned.gemm_min_m ||
        other->thread_split != tuned.thread_split)
      qforge::fuzz::property_failed("an entry changed");
  }
  return 0;
}
