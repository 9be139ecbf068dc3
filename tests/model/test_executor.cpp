// The executor against published outputs and against itself: llama2.c's greedy story,
// GGUF vs llama2.c files, batched prefill vs token-by-token decode, and the quantized
// paths across kernel ISAs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/emulate/emulator.h"
#include "model/runtime/dense_linear.h"
#include "model/runtime/generation.h"
#include "model/runtime/jit_linear.h"
#include "model/runtime/llama_executor.h"
#include "model/runtime/model_loader.h"
#include "model/runtime/sampler.h"
#include "tests/support/emulated_isas.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

// llama2.c doc/stories260K.md: `./run stories260K.bin -z tok512.bin -t 0.0` (256 steps).
constexpr const char* kGreedyStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
    "She said, \"I want to play with your ball, but I can't find it.\"\n"
    "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what "
    "to do.\"\n"
    "Lily didn't want to help her mom, so she said, \"I'm sorry, mom. I didn't know what to "
    "do.\" Her mom said, \"Don't worry, Lily. We can help you.";

// The same file: `./run stories260K.bin -z tok512.bin -t 1.0 -p 0.9 -s 133742` (it stops at
// BOS before 256 steps).
constexpr const char* kSampledStory =
    "Once upon a time, there was a little boy named Timmy. Timmy loved to play with his toys "
    "and eat sandwiches. One day, Timmy's mom told him it was time to rest for a while. Timmy's "
    "friend Billy came over and took him a down.\n"
    "Timmy's mom saw that Timmy was sad, but Timmy said, \"I didn't understand what is it! We "
    "need to find some leafs.\" Timmy thought about it and took a deep breath on a spoon. He "
    "hoped it was important to be kind and continued to find its image next time.\n"
    "After they finished getting, Timmy's dad came up to his house and promised to help Timmy.";

std::string gguf_path() {
  return test::model_path("stories260K/stories260K.gguf");
}
std::string bin_path() {
  return test::model_path("stories260K/stories260K.bin");
}
std::string tok512_path() {
  return test::model_path("stories260K/tok512.bin");
}

// A loaded model with its pool and executor (f32 layers run on oneDNN's threads). One
// thread by default: spinning workers make timings erratic on a loaded 2-core machine.
struct Session {
  LoadedModel model;
  ThreadPool pool;
  LlamaExecutor executor;

  Session(const std::string& path, const std::string& quant, const std::string& tokenizer,
          int threads = 1)
      : model(load_model(path, parse_precision(quant), tokenizer, threads)),
        pool(model.weights.precision.quantized ? threads : 1),
        executor(model.weights, pool) {
    set_dense_threads(threads);
  }
};

std::string greedy_text(const std::string& path, const std::string& quant, int steps,
                        const std::string& tokenizer = "", const std::string& prompt = "") {
  Session session(path, quant, tokenizer);
  Sampler greedy(SamplerOptions{.temperature = 0.f});
  std::string text;
  generate(session.executor, session.model.tokenizer, greedy, prompt, steps,
           [&](std::string_view piece) { text += piece; });
  return text;
}

// Logits of every position of `tokens`: one batch, or one token per forward.
std::vector<float> all_logits(Session& session, const std::vector<int>& tokens, bool batched) {
  if (batched) {
    const std::span<const float> logits = session.executor.forward(tokens, 0, true);
    return {logits.begin(), logits.end()};
  }
  std::vector<float> out;
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    const std::span<const float> logits =
        session.executor.forward(std::span<const int>(&tokens[p], 1), static_cast<int>(p));
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

// |a - b| <= tolerance x (largest |b| of that position's logits), position by position.
void expect_logits_near(const std::vector<float>& a, const std::vector<float>& b, int vocab,
                        float tolerance) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t row = 0; row * vocab < b.size(); ++row) {
    const auto begin = b.begin() + static_cast<std::ptrdiff_t>(row * vocab);
    float largest = 0.f;
    for (auto it = begin; it != begin + vocab; ++it) largest = std::max(largest, std::fabs(*it));
    for (int i = 0; i < vocab; ++i) {
      const std::size_t at = row * vocab + i;
      ASSERT_NEAR(a[at], b[at], tolerance * largest) << "position " << row << " token " << i;
    }
  }
}

const char* kPrompt = "Once upon a time, there was a little girl named Lily. She loved to play";

// A loaded model's packed layers lie in one huge-page arena, front to back in the order a
// decode step reads them (huge_page_arena.h); an f32 model has none to place.
TEST(Executor, PackedLayersLieInOneArenaInDecodeOrder) {
  for (const char* quant : {"int8", "int4-g32"}) {
    const Session session(gguf_path(), quant, "");
    const LlamaWeights& w = session.model.weights;
    std::vector<const JitLinear*> order;
    for (const LayerWeights& layer : w.layers)
      for (const auto* slot : {&layer.wqkv, &layer.wo, &layer.gate_up, &layer.down})
        order.push_back(dynamic_cast<const JitLinear*>(slot->get()));
    order.push_back(dynamic_cast<const JitLinear*>(w.classifier.get()));
    const std::uint8_t* next = nullptr;
    for (const JitLinear* layer : order) {
      ASSERT_NE(layer, nullptr) << quant;
      const AlignedBuffer<std::uint8_t>& data = layer->quantized().weights().data;
      if (next != nullptr) {
        EXPECT_EQ(data.data(), next) << quant;
      }
      next = data.data() + HugePageArena::piece_bytes(data.held_bytes());
    }
  }
}

TEST(Executor, F32GreedyStoryFromGguf) {
  EXPECT_EQ(greedy_text(gguf_path(), "f32", 256), kGreedyStory);
}

TEST(Executor, F32GreedyStoryFromLlama2cBin) {
  EXPECT_EQ(greedy_text(bin_path(), "f32", 256, tok512_path()), kGreedyStory);
}

TEST(Executor, F32SampledStoryMatchesRunC) {
  Session session(bin_path(), "f32", tok512_path());
  Sampler sampler(SamplerOptions{.temperature = 1.f, .top_p = 0.9f, .seed = 133742});
  std::string text;
  generate(session.executor, session.model.tokenizer, sampler, "", 256,
           [&](std::string_view piece) { text += piece; });
  EXPECT_EQ(text, kSampledStory);
}

TEST(Executor, DefaultTokenizerBesideLlama2cBin) {
  EXPECT_EQ(greedy_text(bin_path(), "f32", 32), greedy_text(gguf_path(), "f32", 32));
}

TEST(Executor, GgufAndLlama2cLogitsIdentical) {
  for (const char* quant : {"f32", "int8"}) {
    Session gguf(gguf_path(), quant, "");
    Session bin(bin_path(), quant, tok512_path());
    const std::vector<int> tokens = gguf.model.tokenizer.encode(kPrompt, true, false);
    ASSERT_EQ(tokens, bin.model.tokenizer.encode(kPrompt, true, false));
    EXPECT_EQ(all_logits(gguf, tokens, true), all_logits(bin, tokens, true)) << quant;
  }
}

TEST(Executor, PrefillBatchMatchesTokenByTokenDecode) {
  for (const char* quant : {"f32", "int8", "int4-g32"}) {
    SCOPED_TRACE(quant);
    Session session(gguf_path(), quant, "", /*threads=*/2);
    const std::vector<int> tokens = session.model.tokenizer.encode(kPrompt, true, false);
    ASSERT_GT(tokens.size(), 10u);
    const std::vector<float> batched = all_logits(session, tokens, true);
    const std::vector<float> one_by_one = all_logits(session, tokens, false);
    expect_logits_near(batched, one_by_one, session.executor.vocab_size(), 1e-4f);
  }
}

// Continuous batching: three sequences of different lengths go through one executor
// together (their prompts in one batch of 150+ rows that spans two chunks and splits a
// sequence between them, then one decode row per live sequence, sequences ending at
// different steps) and each sequence's logits equal running it alone: bit for bit on the
// quantized kernels (a row's arithmetic does not depend on M or its neighbours), within
// float noise on oneDNN's f32 layers (whose GEMM differs by M).
TEST(Executor, BatchedSequencesEqualEachSequenceAlone) {
  const std::string prompts[] = {
      std::string(kPrompt) + " with her friends in the park every day.", "Tim had a red ball",
      std::string(kPrompt) + ". " + kPrompt + ". One day she found a big box in the garden. " +
          kPrompt + " and to sing. She had a cat named Tom who liked to sleep in the sun."};
  const int steps[] = {9, 14, 5};
  for (const char* quant : {"int8", "int4-g32", "f32"}) {
    for (const KvType kv : {KvType::f32, KvType::int8}) {
      SCOPED_TRACE(std::string(quant) + " kv " + to_string(kv));
      Session session(gguf_path(), quant, "", /*threads=*/2);
      session.model.weights.precision.kv = kv;
      const int vocab = session.executor.vocab_size();
      std::vector<std::vector<int>> tokens;
      for (const std::string& p : prompts)
        tokens.push_back(session.model.tokenizer.encode(p, true, false));
      // Alone: the prompt, then greedy decode; every step's logits.
      std::vector<std::vector<float>> alone(3);
      {
        LlamaExecutor executor(session.model.weights, session.pool);
        for (int s = 0; s < 3; ++s) {
          std::span<const float> logits = executor.forward(tokens[s], 0);
          alone[s].assign(logits.begin(), logits.end());
          for (int i = 0; i < steps[s]; ++i) {
            const int next = Sampler::argmax(logits);
            logits = executor.forward(std::span<const int>(&next, 1),
                                      static_cast<int>(tokens[s].size()) + i);
            alone[s].insert(alone[s].end(), logits.begin(), logits.end());
          }
        }
      }
      // Together: the prompts interleaved in one batch, then the decode rows of the
      // sequences still running.
      LlamaExecutor executor(session.model.weights, session.pool, 0, /*sequences=*/3);
      std::vector<BatchToken> batch;
      std::size_t longest = 0;
      for (const auto& t : tokens) longest = std::max(longest, t.size());
      for (std::size_t p = 0; p < longest; ++p)
        for (int s : {1, 0, 2})
          if (p < tokens[s].size())
            batch.push_back({tokens[s][p], s, static_cast<int>(p), p + 1 == tokens[s].size()});
      ASSERT_GT(batch.size(), static_cast<std::size_t>(LlamaExecutor::kChunkRows));
      std::vector<std::vector<float>> together(3);
      std::span<const float> logits = executor.forward_batch(batch);
      ASSERT_EQ(logits.size(), 3u * vocab);
      // Batch order of the rows that want logits: the shortest prompt finishes first.
      std::vector<int> order;
      for (const BatchToken& row : batch)
        if (row.logits) order.push_back(row.sequence);
      for (std::size_t i = 0; i < order.size(); ++i)
        together[order[i]].assign(logits.begin() + i * vocab, logits.begin() + (i + 1) * vocab);
      for (int step = 0;; ++step) {
        batch.clear();
        for (int s = 0; s < 3; ++s) {
          if (step >= steps[s]) continue;
          const std::span<const float> last(together[s].end() - vocab, together[s].end());
          batch.push_back(
              {Sampler::argmax(last), s, static_cast<int>(tokens[s].size()) + step, true});
        }
        if (batch.empty()) break;
        logits = executor.forward_batch(batch);
        ASSERT_EQ(logits.size(), batch.size() * vocab);
        for (std::size_t i = 0; i < batch.size(); ++i)
          together[batch[i].sequence].insert(together[batch[i].sequence].end(),
                                             logits.begin() + i * vocab,
                                             logits.begin() + (i + 1) * vocab);
      }
      for (int s = 0; s < 3; ++s) {
        SCOPED_TRACE("sequence " + std::to_string(s));
        ASSERT_EQ(together[s].size(), alone[s].size());
        if (std::string(quant) == "f32")
          expect_logits_near(together[s], alone[s], vocab, 1e-4f);
        else
          EXPECT_EQ(std::memcmp(together[s].data(), alone[s].data(), alone[s].size() * 4), 0);
      }
    }
  }
}

TEST(Executor, BatchRowsOutsideTheSequencesAreRefused) {
  Session session(gguf_path(), "int8", "");
  LlamaExecutor executor(session.model.weights, session.pool, 64, /*sequences=*/2);
  const BatchToken bad_sequence[] = {{1, 2, 0, true}};
  EXPECT_THROW(executor.forward_batch(bad_sequence), Error);
  const BatchToken bad_position[] = {{1, 0, 64, true}};
  EXPECT_THROW(executor.forward_batch(bad_position), Error);
  EXPECT_THROW(executor.forward_batch({}), Error);
  EXPECT_THROW(LlamaExecutor(session.model.weights, session.pool, 64, 0), Error);
}

// The layers behind a norm take the rows before it (forward_normalized: the int8 layers
// quantize each row as it is normalized); with an observer attached the executor writes
// the normalized rows and calls forward() instead. Both give the same logits bit for bit,
// batched and one token at a time.
struct CountingObserver final : LinearInputObserver {
  int calls = 0;
  void observe(int, LinearSite, const float*, int, int) override { ++calls; }
};

TEST(Executor, NormFusedIntoTheLayerInputIsBitIdentical) {
  for (const char* quant : {"int8", "int4-g32", "woq-int8", "f32"}) {
    SCOPED_TRACE(quant);
    Session session(gguf_path(), quant, "", /*threads=*/2);
    const std::vector<int> tokens = session.model.tokenizer.encode(kPrompt, true, false);
    for (bool batched : {true, false}) {
      const std::vector<float> fused = all_logits(session, tokens, batched);
      CountingObserver observer;
      session.executor.set_observer(&observer);
      const std::vector<float> unfused = all_logits(session, tokens, batched);
      session.executor.set_observer(nullptr);
      EXPECT_GT(observer.calls, 0);
      ASSERT_EQ(fused.size(), unfused.size());
      EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0)
          << (batched ? "batched" : "token by token");
    }
  }
}

// Decode steps of a weight-only model split each row into s8 digit rows on a VNNI ISA
// (ops/quant/split_activations.h: three digits for int8 weights, two for int4); their
// logits follow the same model's f32 kernels (--woq-math f32) step by step.
TEST(Executor, SplitDecodeFollowsTheFloatWeightOnlyKernels) {
  const bool vnni = isa_usable(Isa::avx512_vnni) || isa_usable(Isa::avx_vnni);
  const WeightOnlyMath saved = weight_only_math();
  for (const char* quant : {"woq-int8", "woq-int4-g128"}) {
    SCOPED_TRACE(quant);
    set_weight_only_math(WeightOnlyMath::automatic);
    Session split(gguf_path(), quant, "", /*threads=*/2);
    set_weight_only_math(WeightOnlyMath::f32);
    Session f32(gguf_path(), quant, "", /*threads=*/2);
    set_weight_only_math(saved);
    const auto* layer = dynamic_cast<const JitLinear*>(split.model.weights.layers[0].wqkv.get());
    ASSERT_NE(layer, nullptr);
    EXPECT_EQ(layer->quantized().split_digits() != 0, vnni);
    const std::vector<int> tokens = split.model.tokenizer.encode(kPrompt, true, false);
    expect_logits_near(all_logits(split, tokens, false), all_logits(f32, tokens, false),
                       split.executor.vocab_size(), 1e-3f);
  }
}

TEST(Executor, PrefillLongerThanOneChunk) {
  Session session(gguf_path(), "f32", "");
  std::vector<int> tokens;
  while (tokens.size() < LlamaExecutor::kChunkRows + 20) {
    const std::vector<int> more = session.model.tokenizer.encode(kPrompt, true, false);
    tokens.insert(tokens.end(), more.begin(), more.end());
  }
  const std::vector<float> batched = all_logits(session, tokens, true);
  const std::vector<float> one_by_one = all_logits(session, tokens, false);
  expect_logits_near(batched, one_by_one, session.executor.vocab_size(), 1e-4f);
}

TEST(Executor, QuantizedGreedyFollowsTheStory) {
  // int8 per-channel stays on the f32 story for its first sentences.
  const std::string text = greedy_text(gguf_path(), "int8", 40);
  EXPECT_EQ(text.substr(0, 60), std::string(kGreedyStory).substr(0, 60));
}

TEST(Executor, SampledTextIsReproducibleFromTheSeed) {
  Session session(gguf_path(), "int8", "");
  auto sample = [&](std::uint64_t seed) {
    Sampler sampler(SamplerOptions{.temperature = 1.f, .top_k = 40, .top_p = 0.9f, .seed = seed});
    std::string text;
    generate(session.executor, session.model.tokenizer, sampler, "Once upon a time", 60,
             [&](std::string_view piece) { text += piece; });
    return text;
  };
  EXPECT_EQ(sample(133742), sample(133742));
  EXPECT_NE(sample(133742), sample(7));
}

// The same greedy tokens whichever kernel ISA runs them (the ISAs this CPU lacks run
// under the instruction emulator, which is slow: 48 tokens each).
TEST(Executor, QuantizedGreedyIdenticalAcrossIsas) {
  test::enable_emulated_isas();
  const Isa cap = max_isa();
  std::vector<Isa> isas;  // decided before any cap is set below
  for (Isa isa : {Isa::avx2, Isa::avx_vnni, Isa::avx512_vnni})
    if (isa_usable(isa)) isas.push_back(isa);
  // QFORGE_MAX_ISA=avx2 leaves one kernel ISA, nothing to compare it with; uncapped, the
  // emulator always provides three.
  if (cap == Isa::avx2) GTEST_SKIP() << "QFORGE_MAX_ISA=avx2 leaves one kernel ISA";
  ASSERT_GE(isas.size(), 2u) << "needs at least two kernel ISAs (native or emulated)";
  const std::uint64_t emulated_before = emulate::emulated_instruction_count();
  for (const char* quant : {"int8", "int4-g32"}) {
    std::string reference;
    for (Isa isa : isas) {
      set_max_isa(isa);
      Session session(gguf_path(), quant, "");
      for (const GemmKey& key : session.model.weights.warmup_keys())
        ASSERT_EQ(key.isa, isa) << kernel_name(key);
      const std::string text = greedy_text(gguf_path(), quant, 48);
      if (reference.empty()) reference = text;
      EXPECT_EQ(text, reference) << quant << " with " << isa_name(isa);
    }
  }
  set_max_isa(cap);
  set_emulated_isa_mask(0);
  const IsaMask native = hardware_isa_mask(cpu_info());
  const bool some_emulated =
      std::any_of(isas.begin(), isas.end(), [native](Isa isa) { return !(native & isa_bit(isa)); });
  if (some_emulated) {  // an emulated ISA's kernels did run through the emulator
    EXPECT_GT(emulate::emulated_instruction_count(), emulated_before);
  }
}

}  // namespace
}  // namespace qforge
