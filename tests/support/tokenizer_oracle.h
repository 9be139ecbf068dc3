// Runs the npm tokenizers of tests/oracles/tokenizers (oracle.mjs) on a corpus and reads
// back their vocabulary and token ids. tools/bootstrap installs Node.js and the packages.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/run_command.h"

namespace qforge::test {

struct OracleResult {
  std::vector<int> ids;
  std::string decoded;  // the ids that are not special tokens, decoded
};

struct OracleVocabulary {
  std::string pre;
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  std::vector<std::string> merges;
  int bos = -1, eos = -1, eot = -1;
  bool add_bos = false;
};

struct OracleRun {
  OracleVocabulary vocabulary;
  std::vector<OracleResult> results;
};

inline std::filesystem::path tokenizer_oracle_dir() {
  return std::filesystem::path(QFORGE_SOURCE_ROOT) / "tests" / "oracles" / "tokenizers";
}

// Throws with what to run when Node.js or the packages are missing.
inline OracleRun run_tokenizer_oracle(const std::string& vocabulary,
                                      const std::vector<std::string>& corpus,
                                      const std::filesystem::path& scratch) {
  const std::filesystem::path dir = tokenizer_oracle_dir();
  if (!std::filesystem::exists(dir / "node_modules" / "llama3-tokenizer-js"))
    throw std::runtime_error("the npm tokenizers are not installed in " + dir.string() +
                             " (run tools/bootstrap, which runs npm ci there)");
  const std::filesystem::path in = scratch / ("corpus-" + vocabulary + ".json");
  const std::filesystem::path out = scratch / ("oracle-" + vocabulary + ".json");
  std::ofstream(in) << nlohmann::json(corpus).dump();
  const CommandResult run =
      run_command("node '" + (dir / "oracle.mjs").string() + "' " + vocabulary + " '" +
                  in.string() + "' '" + out.string() + "'");
  if (run.exit_code != 0)
    throw std::runtime_error("node oracle.mjs " + vocabulary + " failed (exit " +
                             std::to_string(run.exit_code) + "): " + run.output);
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
  OracleRun result;
  const nlohmann::json& v = j.at("vocabulary");
  result.vocabulary.pre = v.at("pre");
  result.vocabulary.tokens = v.at("tokens").get<std::vector<std::string>>();
  result.vocabulary.types = v.at("types").get<std::vector<std::int32_t>>();
  result.vocabulary.merges = v.at("merges").get<std::vector<std::string>>();
  result.vocabulary.bos = v.at("bos");
  result.vocabulary.eos = v.at("eos");
  result.vocabulary.eot = v.at("eot");
  result.vocabulary.add_bos = v.at("add_bos");
  for (const nlohmann::json& r : j.at("results"))
    result.results.push_back({r.at("ids").get<std::vector<int>>(), r.at("decoded")});
  return result;
}

}  // namespace qforge::test
