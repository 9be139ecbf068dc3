// Continuous batching changes no result: every request gets, token for token, what it gets
// alone (continue_generation on an executor of its own), whatever runs beside it; stop
// strings cut the text where OpenAI cuts it; a cancelled request leaves its slot at once;
// a full queue refuses; stop() ends everything.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/batch_engine.h"
#include "serve/stop_strings.h"
#include "tests/serve/serve_test_util.h"

namespace qforge {
namespace {

using serve::BatchEngine;
using serve::EngineRequest;
using serve::FinishReason;
using serve::RequestChannel;

constexpr int kContext = 256;

const char* kPrompts[] = {
    "Once upon a time",
    "Tim had a red ball. He liked to throw it to his dog, and the dog ran after it every day",
    "Lily",
    "The sun was hot and the sky was blue. Mom said: let us go to the park and play on the "
    "swings, then we will eat ice cream by the pond with the ducks",
    "One day a little bird",
    "Ben and Sue",
    "There was a big tree in the garden",
    "Sam was sad because",
};

EngineRequest request(const test::ServeModel& m, int i, float temperature) {
  EngineRequest r;
  r.prompt = m.model.tokenizer.encode_prompt(kPrompts[i % 8]);
  r.max_tokens = 7 + 13 * (i % 5);  // 7 .. 59: requests end at different steps
  r.sampling.temperature = temperature;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 100 + static_cast<std::uint64_t>(i);
  r.channel = std::make_shared<RequestChannel>();
  return r;
}

void expect_concurrent_requests_equal_alone(const std::string& quant, int slots, int count,
                                            float temperature) {
  SCOPED_TRACE(quant + ", " + std::to_string(slots) + " slots, " + std::to_string(count) +
               " requests, temperature " + std::to_string(temperature));
  test::ServeModel m(quant);
  std::vector<EngineRequest> requests;
  std::vector<test::Alone> alone;
  for (int i = 0; i < count; ++i) {
    requests.push_back(request(m, i, temperature));
    alone.push_back(test::run_alone(m, requests.back(), kContext));
  }
  LlamaExecutor executor(m.model.weights, m.pool, kContext, slots);
  BatchEngine engine(executor, m.model.tokenizer);
  for (const EngineRequest& r : requests)
    ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
  for (int i = 0; i < count; ++i) {
    const serve::ChannelRead got = requests[static_cast<std::size_t>(i)].channel->wait_all();
    ASSERT_TRUE(got.result);
    EXPECT_EQ(got.text, alone[static_cast<std::size_t>(i)].text) << "request " << i;
    EXPECT_EQ(got.result->completion_tokens, alone[static_cast<std::size_t>(i)].completion_tokens)
        << "request " << i;
    EXPECT_EQ(got.result->prompt_tokens, static_cast<int>(requests[i].prompt.size()));
    EXPECT_EQ(got.result->reason, alone[static_cast<std::size_t>(i)].stopped_by_token
                                      ? FinishReason::stop
                                      : FinishReason::length);
    EXPECT_GT(got.result->seconds_to_first_token, 0.0);
  }
  const serve::EngineMetrics metrics = engine.metrics();
  EXPECT_EQ(metrics.active_slots, 0);
  EXPECT_EQ(metrics.requests_finished, static_cast<std::uint64_t>(count));
  EXPECT_EQ(metrics.first_token_count, static_cast<std::uint64_t>(count));
}

TEST(BatchEngine, OneRequestEqualsRunningItAlone) {
  expect_concurrent_requests_equal_alone("int8", 1, 1, 0.f);
}

TEST(BatchEngine, ThreeConcurrentRequestsEqualEachAlone) {
  expect_concurrent_requests_equal_alone("int8", 3, 3, 0.f);
  expect_concurrent_requests_equal_alone("int4-g32", 3, 3, 0.8f);
}

TEST(BatchEngine, EightConcurrentRequestsEqualEachAlone) {
  expect_concurrent_requests_equal_alone("int8", 8, 8, 0.f);
  expect_concurrent_requests_equal_alone("int8", 8, 8, 1.f);
}

// More requests than slots: the queue feeds slots as they free.
TEST(BatchEngine, QueuedRequestsTakeFreedSlotsAndStillEqualAlone) {
  expect_concurrent_requests_equal_alone("int8", 2, 7, 0.f);
}

// A prompt longer than one step's prefill rows is run a chunk per step beside the others.
TEST(BatchEngine, LongPromptsArePrefilledInChunksBesideDecodes) {
  test::ServeModel m("int8");
  std::vector<EngineRequest> requests = {request(m, 0, 0.f), request(m, 3, 0.f)};
  std::string longer;
  for (int i = 0; i < 2; ++i) longer += std::string(kPrompts[3]) + ". ";
  requests[1].prompt = m.model.tokenizer.encode_prompt(longer);
  ASSERT_GT(requests[1].prompt.size(), 100u);
  std::vector<test::Alone> alone;
  for (const EngineRequest& r : requests) alone.push_back(test::run_alone(m, r, kContext));
  LlamaExecutor executor(m.model.weights, m.pool, kContext, 2);
  serve::EngineOptions options;
  options.prefill_rows = 16;
  BatchEngine engine(executor, m.model.tokenizer, options);
  for (const EngineRequest& r : requests)
    ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
  for (std::size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(requests[i].channel->wait_all().text, alone[i].text) << "request " << i;
  EXPECT_GE(engine.metrics().steps, requests[1].prompt.size() / 16);
}

TEST(BatchEngine, StopStringsCutTheTextWhereTheyFirstAppear) {
  test::ServeModel m("int8");
  EngineRequest r = request(m, 0, 0.f);
  r.max_tokens = 60;
  const std::string full = test::run_alone(m, r, kContext).text;
  const std::size_t cut = full.find("Lily");
  ASSERT_NE(cut, std::string::npos) << full;
  r.stop = {"Lily", "no such text"};
  LlamaExecutor executor(m.model.weights, m.pool, kContext, 2);
  BatchEngine engine(executor, m.model.tokenizer);
  ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
  const serve::ChannelRead got = r.channel->wait_all();
  EXPECT_EQ(got.text, full.substr(0, cut));
  EXPECT_EQ(got.result->reason, FinishReason::stop);
  EXPECT_LT(got.result->completion_tokens, 60);
}

TEST(StopStrings, HoldsBackWhatCouldStillBecomeAStopString) {
  serve::StopStrings s({"\n\n", "END"});
  EXPECT_EQ(s.push("Hi.\n"), "Hi.");
  EXPECT_EQ(s.push("x E"), "\nx ");
  EXPECT_EQ(s.push("N"), "");
  EXPECT_EQ(s.push("d"), "ENd");  // not END after all
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.push(" E"), " ");
  EXPECT_EQ(s.push("ND and more"), "");
  EXPECT_TRUE(s.stopped());
}

TEST(StopStrings, CutsAtTheEarliestAndReturnsNothingAfter) {
  serve::StopStrings s({"END", "\n\n"});
  EXPECT_EQ(s.push("one\n\ntwo END"), "one");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.finish(), "");
  serve::StopStrings t({"abc"});
  EXPECT_EQ(t.push("xab"), "x");
  EXPECT_EQ(t.finish(), "ab");  // ended another way: what was held is text
  serve::StopStrings none({});
  EXPECT_EQ(none.push("all of it"), "all of it");
}

TEST(BatchEngine, ACancelledRequestLeavesItsSlotAtOnce) {
  test::ServeModel m("int8");
  LlamaExecutor executor(m.model.weights, m.pool, kContext, 1);
  BatchEngine engine(executor, m.model.tokenizer);
  EngineRequest r = request(m, 0, 1.f);
  r.max_tokens = kContext - static_cast<int>(r.prompt.size());
  ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
  ASSERT_FALSE(r.channel->wait_next(std::chrono::seconds(30)).text.empty());
  r.channel->cancel();
  const serve::ChannelRead end = r.channel->wait_all();
  EXPECT_EQ(end.result->reason, FinishReason::cancelled);
  EXPECT_LT(end.result->completion_tokens, r.max_tokens);
  EXPECT_EQ(engine.metrics().requests_cancelled, 1u);
  // The one slot serves the next request, as it would alone.
  EngineRequest next = request(m, 1, 0.f);
  const std::string alone = test::run_alone(m, next, kContext).text;
  ASSERT_EQ(engine.submit(next), BatchEngine::Admission::accepted);
  EXPECT_EQ(next.channel->wait_all().text, alone);
  EXPECT_EQ(engine.metrics().active_slots, 0);
}

TEST(BatchEngine, AFullQueueRefusesAndStopCancelsEverything) {
  test::ServeModel m("int8");
  LlamaExecutor executor(m.model.weights, m.pool, kContext, 2);
  serve::EngineOptions options;
  options.queue_limit = 1;
  BatchEngine engine(executor, m.model.tokenizer, options);
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 4; ++i) {
    requests.push_back(request(m, i, 1.f));
    requests.back().max_tokens = kContext - static_cast<int>(requests.back().prompt.size());
  }
  EXPECT_EQ(engine.submit(requests[0]), BatchEngine::Admission::accepted);
  EXPECT_EQ(engine.submit(requests[1]), BatchEngine::Admission::accepted);
  EXPECT_EQ(engine.submit(requests[2]), BatchEngine::Admission::accepted);  // queued
  EXPECT_EQ(engine.submit(requests[3]), BatchEngine::Admission::queue_full);
  engine.stop();
  for (int i = 0; i < 3; ++i) {
    const serve::ChannelRead end = requests[static_cast<std::size_t>(i)].channel->wait_all();
    EXPECT_EQ(end.result->reason, FinishReason::cancelled) << "request " << i;
  }
  EXPECT_EQ(engine.submit(request(m, 5, 0.f)), BatchEngine::Admission::stopped);
}

TEST(BatchEngine, APromptLongerThanTheContextEndsWithAnError) {
  test::ServeModel m("int8");
  LlamaExecutor executor(m.model.weights, m.pool, 16, 1);
  BatchEngine engine(executor, m.model.tokenizer);
  EngineRequest r = request(m, 3, 0.f);
  ASSERT_GT(r.prompt.size(), 16u);
  ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
  const serve::ChannelRead end = r.channel->wait_all();
  EXPECT_EQ(end.result->reason, FinishReason::error);
  EXPECT_NE(end.result->error.find("context holds 16"), std::string::npos) << end.result->error;
}

}  // namespace
}  // namespace qforge

namespace qforge {
namespace {

// Short greedy requests one after another beside a long sampled one, which ends midway:
// slots are reused with another request's cache rows behind them.
TEST(BatchEngine, ShortRequestsBesideALongOneEqualAlone) {
  test::ServeModel m("int8");
  LlamaExecutor executor(m.model.weights, m.pool, kContext, 2);
  BatchEngine engine(executor, m.model.tokenizer);
  EngineRequest shortest = request(m, 2, 0.f);
  shortest.max_tokens = 12;
  const std::string alone = test::run_alone(m, shortest, kContext).text;
  for (int round = 0; round < 20; ++round) {
    EngineRequest sampled = request(m, round, 1.f);
    sampled.max_tokens = 40 + round;
    ASSERT_EQ(engine.submit(sampled), BatchEngine::Admission::accepted);
    for (int i = 0; i < 3; ++i) {
      EngineRequest r = shortest;
      r.channel = std::make_shared<RequestChannel>();
      ASSERT_EQ(engine.submit(r), BatchEngine::Admission::accepted);
      ASSERT_EQ(r.channel->wait_all().text, alone) << "round " << round << ", request " << i;
    }
    sampled.channel->wait_all();
  }
}

}  // namespace
}  // namespace qforge
