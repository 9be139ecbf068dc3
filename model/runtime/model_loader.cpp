#include "model/runtime/model_loader.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <unordered_set>
#include <utility>
#include <vector>

#include "jit/base/error.h"
#include "jit/core/code_cache.h"

namespace qforge {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

LoadedModel load_model(const std::string& path, const Precision& precision,
                       const std::string& tokenizer_path, int threads, const LoadProgress& progress,
                       const ModelPreparer& prepare) {
  auto start = std::chrono::steady_clock::now();
  std::optional<ModelFile> opened;
  std::optional<Tokenizer> read_tokenizer;
  try {
    opened.emplace(open_model(path));
    read_tokenizer.emplace(load_model_tokenizer(*opened, tokenizer_path));
  } catch (const std::bad_alloc&) {
    std::error_code ignored;
    fail(path, ": not enough memory to read the file's metadata and vocabulary beside its ",
         std::filesystem::file_size(path, ignored) >> 20,
         " MiB mapping; free memory or raise the process's limit (ulimit -v)");
  }
  ModelFile& file = *opened;
  Tokenizer tokenizer = std::move(*read_tokenizer);
  const double load_seconds = seconds_since(start);
  if (prepare) prepare(file, tokenizer);

  start = std::chrono::steady_clock::now();
  LlamaWeights weights = build_llama_weights(file, precision, threads, progress);
  const double build_seconds = seconds_since(start);

  const std::vector<GemmKey> all_keys = weights.warmup_keys();
  const std::unordered_set<GemmKey, GemmKeyHash> distinct(all_keys.begin(), all_keys.end());
  const std::vector<GemmKey> keys(distinct.begin(), distinct.end());
  LoadedModel out{std::move(tokenizer), std::move(weights), 0, 0, 0, 0, std::nullopt};
  if (file.gguf() != nullptr)
    out.chat_template = file.gguf()->find_string("tokenizer.chat_template");
  out.load_seconds = load_seconds;
  try {
    out.jit_seconds = CodeCache::global().warmup(keys) * 1e-6;
  } catch (const std::bad_alloc&) {
    fail(path, ": not enough memory for the code of its ", keys.size(), " kernels beside its ",
         out.weights.weight_bytes() >> 20,
         " MiB of weights; free memory or raise the process's limit (ulimit -v)");
  }
  out.kernels = keys.size();
  // Building a layer already generated its decode (M = 1) kernel: count it as JIT time.
  double decode_jit_seconds = 0;
  for (const GemmKey& key : keys)
    if (key.bucket == MBucket::one)
      decode_jit_seconds += CodeCache::global().get(key).generation_us * 1e-6;
  out.pack_seconds = std::max(0.0, build_seconds - decode_jit_seconds);
  return out;
}

Tokenizer load_model_tokenizer(const ModelFile& model, const std::string& path) {
  const int vocab = model.config().vocab_size;
  if (!path.empty()) return Tokenizer::from_llama2c_file(path, vocab);
  if (model.gguf() != nullptr) {
    Tokenizer tokenizer = Tokenizer::from_gguf(*model.gguf());
    if (tokenizer.vocab_size() != vocab)
      fail(model.path(), ": metadata 'tokenizer.ggml.tokens' has ", tokenizer.vocab_size(),
           " tokens, but the model's vocabulary ('llama.vocab_size', the rows of "
           "'token_embd.weight') has ",
           vocab);
    return tokenizer;
  }
  const std::filesystem::path dir = std::filesystem::path(model.path()).parent_path();
  for (const std::string& name :
       {"tok" + std::to_string(vocab) + ".bin", std::string("tokenizer.bin")})
    if (std::filesystem::exists(dir / name))
      return Tokenizer::from_llama2c_file((dir / name).string(), vocab);
  fail(model.path(), ": no tokenizer found (looked for tok", vocab,
       ".bin and tokenizer.bin beside it); pass --tokenizer FILE");
}
}  // namespace qforge
