// Which int8 key layout keeps a model closer to its f32-cache self: one scale per cached
// row (per token) or one scale per channel over a group of G positions (KIVI's keys, what
// `--kv int8` stores), with KIVI's full-precision residual and without it.
//
//   kv_key_scales -m MODEL -f TEXT [--ctx N] [--quant Q] [--group G] [-t T]
//
// Every variant decodes each chunk one token at a time (as generation does). The
// emulated variants keep an f32 cache and round its rows in place after a step: with the
// residual, rows of the newest, incomplete group of G positions are still exact and a
// step that completes a group rounds that group; without it, each step rounds its own row
// (which its own step read exactly). The rounding:
//
//   keys, per token     s_p   = max_c |k[p][c]| / 127     k[p][c] ~ s_p   * q[p][c]
//   keys, per channel   s_g,c = max_p |k[p][c]| / 127     k[p][c] ~ s_g,c * q[p][c]   p in g
//   values, per token   as keys per token (KIVI quantizes values per token too)
//
// rounded q = clamp(round_half_away(x / s), -127, 127), stored as s * q in an f32 cache:
// the same floats as the int8 cache's decode (the cache itself also rounds q for its
// integer q.k: vector_kernels.h). The reference is the same model with the
// f32 cache, also decoded token by token; the scores are model/runtime/perplexity.h's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/text_file.h"
#include "jit/base/error.h"
#include "model/runtime/model_session.h"
#include "model/runtime/perplexity.h"
#include "ops/quant/activation.h"

namespace {

using namespace qforge;

float round_int8(float x, float scale) {
  return scale > 0.f ? scale * std::clamp(round_half_away(x / scale), -127.f, 127.f) : 0.f;
}

// rows[p * n + c], p < count: one scale per row.
void round_per_token(float* rows, int count, int n) {
  for (int p = 0; p < count; ++p) {
    float* row = rows + std::size_t(p) * n;
    float absmax = 0.f;
    for (int c = 0; c < n; ++c) absmax = std::max(absmax, std::abs(row[c]));
    for (int c = 0; c < n; ++c) row[c] = round_int8(row[c], absmax / 127.f);
  }
}

// One scale per channel c over the `count` rows.
void round_per_channel(float* rows, int count, int n) {
  for (int c = 0; c < n; ++c) {
    float absmax = 0.f;
    for (int p = 0; p < count; ++p)
      absmax = std::max(absmax, std::abs(rows[std::size_t(p) * n + c]));
    for (int p = 0; p < count; ++p) {
      float& x = rows[std::size_t(p) * n + c];
      x = round_int8(x, absmax / 127.f);
    }
  }
}

enum class KeyScales { per_token, per_channel };

// Rounds positions [first, first + count) of every layer and kv head in place.
void round_group(KvCache& cache, int layers, KeyScales keys, int first, int count) {
  const int n = cache.head_dim();
  for (int layer = 0; layer < layers; ++layer)
    for (int h = 0; h < cache.kv_heads(); ++h) {
      float* k = cache.f32_keys(layer, h) + std::size_t(first) * n;
      float* v = cache.f32_values(layer, h) + std::size_t(first) * n;
      if (keys == KeyScales::per_channel)
        round_per_channel(k, count, n);
      else
        round_per_token(k, count, n);
      round_per_token(v, count, n);
    }
}

// The logits of every position of a chunk, decoded one token at a time; `after_step(p)`
// runs once position p is cached.
ChunkLogits decoded_logits(LlamaExecutor& executor, std::vector<float>& buffer,
                           std::function<void(int)> after_step) {
  return [&executor, &buffer, after_step](std::span<const int> chunk) {
    const int vocab = executor.vocab_size();
    buffer.resize(chunk.size() * std::size_t(vocab));
    for (std::size_t p = 0; p < chunk.size(); ++p) {
      const std::span<const float> logits =
          executor.forward(chunk.subspan(p, 1), static_cast<int>(p));
      std::memcpy(buffer.data() + p * vocab, logits.data(), sizeof(float) * vocab);
      if (after_step) after_step(static_cast<int>(p));
    }
    return std::span<const float>(buffer);
  };
}

struct Args {
  std::string model, text, quant = "f32";
  int ctx = 256, group = 32, threads = 2;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    QF_REQUIRE(i + 1 < argc, "kv_key_scales: ", flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "-m")
      a.model = value;
    else if (flag == "-f")
      a.text = value;
    else if (flag == "--quant")
      a.quant = value;
    else if (flag == "--ctx")
      a.ctx = std::stoi(value);
    else if (flag == "--group")
      a.group = std::stoi(value);
    else if (flag == "-t")
      a.threads = std::stoi(value);
    else
      fail("kv_key_scales: unknown option ", flag);
  }
  QF_REQUIRE(!a.model.empty() && !a.text.empty(),
             "usage: kv_key_scales -m MODEL -f TEXT [--ctx N] [--quant Q] [--group G] [-t T]");
  QF_REQUIRE(a.ctx > 1 && a.group > 0, "kv_key_scales: --ctx > 1 and --group > 0");
  return a;
}

void run(const Args& a) {
  auto open = [&](KvType kv) {
    Precision precision = parse_precision(a.quant);
    precision.kv = kv;
    return open_session(a.model, precision, a.threads, a.ctx);
  };
  auto reference = open(KvType::f32);
  const Tokenizer& tokenizer = reference->model.tokenizer;
  const std::vector<int> tokens =
      tokenizer.encode(cli::read_text_file(a.text), tokenizer.adds_bos(), /*add_eos=*/false);
  const int vocab = reference->executor->vocab_size(), bos = tokenizer.prompt_bos_id();
  std::vector<float> reference_buffer, buffer;
  const ChunkLogits reference_logits = decoded_logits(*reference->executor, reference_buffer, {});

  std::printf(
      "%s, weights %s, ctx %d, %zu tokens, decoded token by token; KLD from the f32 cache\n",
      a.model.c_str(), a.quant.c_str(), a.ctx, tokens.size());
  std::printf("%-58s %10s %10s %10s %8s\n", "int8 cache", "PPL", "mean KLD", "+/-", "top-1");
  auto report = [&](const char* name, const ChunkLogits& model) {
    const PerplexityResult r =
        evaluate_perplexity(tokens, a.ctx, vocab, bos, model, reference_logits);
    std::printf("%-58s %10.4f %10.6f %10.6f %7.2f%%\n", name, r.perplexity, r.mean_kld,
                r.kld_stderr, 100.0 * r.top1_agreement);
    std::fflush(stdout);
  };

  {  // The int8 cache itself.
    auto int8 = open(KvType::int8);
    report("--kv int8 (KIVI keys, residual 32, integer q.k)",
           decoded_logits(*int8->executor, buffer, {}));
  }
  auto f32 = open(KvType::f32);
  LlamaExecutor& executor = *f32->executor;
  KvCache& cache = executor.cache();
  const int layers = f32->model.weights.config.n_layers;
  report("emulated: keys per token, no residual",
         decoded_logits(executor, buffer, [&cache, layers](int p) {
           round_group(cache, layers, KeyScales::per_token, p, 1);
         }));
  for (const KeyScales keys : {KeyScales::per_token, KeyScales::per_channel}) {
    const int g = a.group;
    auto round_completed = [&cache, layers, keys, g](int p) {
      if ((p + 1) % g == 0) round_group(cache, layers, keys, p + 1 - g, g);
    };
    const std::string name =
        std::string(keys == KeyScales::per_token ? "emulated: keys per token"
                                                 : "emulated: keys per channel (KIVI)") +
        ", residual " + std::to_string(g);
    report(name.c_str(), decoded_logits(executor, buffer, round_completed));
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kv_key_scales: %s\n", e.what());
    return 1;
  }
  return 0;
}
