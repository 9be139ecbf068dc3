// Chat formats rendered as their Jinja templates write them, template recognition, and a
// chat session's cached turns against running the whole conversation from scratch.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/runtime/chat_format.h"
#include "model/runtime/chat_session.h"
#include "model/runtime/llama_executor.h"
#include "model/runtime/model_loader.h"
#include "tests/model/model_test_util.h"
#include "tests/support/model_paths.h"

namespace qforge {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", " Hello! "}, {"user", "Why?"}};

TEST(ChatFormat, RendersEachFormatAsItsTemplateDoes) {
  EXPECT_EQ(render_chat(ChatFormat::Llama3, kConversation, true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhy?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat(ChatFormat::ChatMl, kConversation, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n Hello! <|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render_chat(ChatFormat::ChatMl, kConversation, false).ends_with("Why?<|im_end|>\n"),
            true);
  EXPECT_EQ(render_chat(ChatFormat::Llama2, kConversation, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Why? [/INST]");
  test::expect_error(
      [] {
        render_chat(ChatFormat::ChatMl, {{"tool", "x"}}, true);
      },
      {"message 0", "\"tool\""});
}

TEST(ChatFormat, RecognisesTheTemplatesFilesCarry) {
  // Excerpts of the templates Llama 3, Qwen2 and Llama 2 files carry.
  EXPECT_EQ(recognise_chat_template(
                "{% set loop_messages = messages %}{% for message in loop_messages %}{% set "
                "content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
                "message['content'] | trim + '<|eot_id|>' %}"),
            ChatFormat::Llama3);
  EXPECT_EQ(recognise_chat_template("{% for message in messages %}{{'<|im_start|>' + "
                                    "message['role'] + '\\n' + message['content'] + "
                                    "'<|im_end|>' + '\\n'}}{% endfor %}"),
            ChatFormat::ChatMl);
  EXPECT_EQ(recognise_chat_template("{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"),
            ChatFormat::Llama2);
  EXPECT_EQ(recognise_chat_template("{{ messages }}"), std::nullopt);
  EXPECT_EQ(chat_format_named("chatml"), ChatFormat::ChatMl);
  EXPECT_EQ(chat_format_named("vicuna"), std::nullopt);
}

// Greedy replies: turn by turn with the cache kept, and each turn's whole conversation run
// again in a fresh cache, must be the same text.
TEST(ChatSession, CachedTurnsEqualRunningTheConversationAgain) {
  LoadedModel model =
      load_model(test::model_path("stories260K/stories260K.gguf"), parse_precision("f32"));
  ThreadPool pool(1);
  LlamaExecutor executor(model.weights, pool, 512);
  Sampler sampler(SamplerOptions{0.0f, 0, 0.9f, 1});
  ChatSession chat(executor, model.tokenizer, sampler, ChatFormat::Llama2);
  chat.add({"system", "Tell stories."});
  for (const char* user : {"Once upon a time", "What did Lily see?", "And then?"}) {
    SCOPED_TRACE(user);
    const int cached_before = chat.cached_tokens();
    std::string streamed;
    const GenerationStats stats =
        chat.reply(user, 24, [&](std::string_view piece) { streamed += piece; });
    EXPECT_EQ(streamed, chat.messages().back().content);
    EXPECT_GT(stats.generated_tokens, 0);
    if (cached_before > 0) {
      EXPECT_LT(stats.prompt_tokens, chat.cached_tokens() - stats.generated_tokens);
    }

    std::vector<ChatMessage> before(chat.messages().begin(), chat.messages().end() - 1);
    const std::vector<int> tokens =
        model.tokenizer.encode_prompt(render_chat(ChatFormat::Llama2, before, true));
    LlamaExecutor fresh(model.weights, pool, 512);
    Sampler greedy(SamplerOptions{0.0f, 0, 0.9f, 1});
    std::string again;
    continue_generation(fresh, model.tokenizer, greedy, tokens, 0, 24,
                        {[&](std::string_view piece) { again += piece; }, false, {}});
    EXPECT_EQ(again, chat.messages().back().content);
  }
}

}  // namespace
}  // namespace qforge
