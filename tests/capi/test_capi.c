/* The C API from C, linked against libqforge.so: the shipped stories260K model's greedy
 * story (llama2.c's own output), tokenize / detokenize, a sequence that continues across
 * calls exactly as one call would, the callback stopping generation, chat prompts, and
 * every error path returning NULL / negative with a message naming the field.
 *
 * Usage: test_capi [MODELS_DIR]: $QFORGE_MODELS wins over MODELS_DIR (the build passes
 * ../shared/models beside the repository). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include/qforge.h"

static int failures = 0;

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      ++failures;                                               \
    }                                                           \
  } while (0)

/* llama2.c doc/stories260K.md: `./run stories260K.bin -z tok512.bin -t 0.0` (256 steps). */
static const char *kGreedyStory =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.\n"
    "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do. "
    "She said, \"I want to play with your ball, but I can't find it.\"\n"
    "Lily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what "
    "to do.\"\n"
    "Lily didn't want to help her mom, so she said, \"I'm sorry, mom. I didn't know what to "
    "do.\" Her mom said, \"Don't worry, Lily. We can help you.";

/* A growing string the token callback appends to; stops after `limit` tokens if > 0. */
typedef struct {
  char text[8192];
  size_t length;
  int tokens;
  int limit;
} Collected;

static int collect(const char *text, size_t length, int32_t token, void *user) {
  Collected *c = (Collected *)user;
  if (c->length + length < sizeof c->text) {
    memcpy(c->text + c->length, text, length);
    c->length += length;
    c->text[c->length] = '\0';
  }
  if (token >= 0) ++c->tokens;
  return c->limit > 0 && c->tokens >= c->limit;
}

static int contains(const char *haystack, const char *needle) {
  return strstr(haystack, needle) != NULL;
}

static qf_generate_params greedy(int max_tokens) {
  qf_generate_params g = qf_generate_default_params();
  g.temperature = 0.f;
  g.max_tokens = max_tokens;
  return g;
}

static void test_errors(const char *model_path) {
  qf_model_params p = qf_model_default_params();
  CHECK(qf_model_load("/nonexistent/model.gguf", &p) == NULL, "a missing file loads");
  CHECK(contains(qf_last_error(), "/nonexistent/model.gguf"), "error: %s", qf_last_error());

  p.quant = "int3";
  CHECK(qf_model_load(model_path, &p) == NULL, "quant int3 loads");
  CHECK(contains(qf_last_error(), "int3"), "error: %s", qf_last_error());

  p = qf_model_default_params();
  p.kv = "int2";
  CHECK(qf_model_load(model_path, &p) == NULL, "kv int2 loads");
  CHECK(contains(qf_last_error(), "qf_model_params.kv"), "error: %s", qf_last_error());

  p = qf_model_default_params();
  p.n_keep = 2;
  CHECK(qf_model_load(model_path, &p) == NULL, "keep NULL with 2 items loads");
  CHECK(contains(qf_last_error(), "qf_model_params.keep"), "error: %s", qf_last_error());

  p = qf_model_default_params();
  p.max_isa = "avx9";
  CHECK(qf_model_load(model_path, &p) == NULL, "max_isa avx9 loads");
  CHECK(contains(qf_last_error(), "avx9"), "error: %s", qf_last_error());

  CHECK(qf_model_load(NULL, NULL) == NULL, "NULL path loads");
  CHECK(qf_sequence_new(NULL, 0) == NULL, "a sequence of no model");
  CHECK(qf_generate(NULL, "x", NULL, NULL, NULL, NULL) < 0, "generate on no sequence");
  CHECK(contains(qf_last_error(), "sequence is NULL"), "error: %s", qf_last_error());
}

/* f32 tells llama2.c's whole story; int8 per-channel stays on it for its first sentence
 * (`compare` bytes; 0: all). */
static void test_greedy_story(const char *model_path, const char *quant, size_t compare) {
  qf_model_params p = qf_model_default_params();
  p.quant = quant;
  qf_model *model = qf_model_load(model_path, &p);
  CHECK(model != NULL, "load %s: %s", quant, qf_last_error());
  if (model == NULL) return;
  qf_sequence *seq = qf_sequence_new(model, 0);
  CHECK(seq != NULL, "sequence: %s", qf_last_error());
  Collected out = {0};
  qf_generate_params g = greedy(256);
  g.echo_prompt = 1;
  qf_generate_stats stats;
  CHECK(qf_generate(seq, "", &g, collect, &out, &stats) == 0, "generate: %s", qf_last_error());
  if (compare == 0)
    CHECK(strcmp(out.text, kGreedyStory) == 0, "%s greedy story:\n%s", quant, out.text);
  else
    CHECK(strncmp(out.text, kGreedyStory, compare) == 0, "%s greedy story:\n%s", quant, out.text);
  CHECK(stats.generated_tokens == 256 && stats.stop_reason == QF_STOP_LENGTH,
        "generated %d, stop %d", stats.generated_tokens, (int)stats.stop_reason);
  CHECK(qf_sequence_length(seq) == 1 + 256, "length %d", qf_sequence_length(seq));
  qf_sequence_free(seq);
  qf_model_free(model);
}

static void test_model(const char *model_path) {
  qf_model_params p = qf_model_default_params();
  p.quant = "int8";
  p.threads = 2;
  qf_model *model = qf_model_load(model_path, &p);
  CHECK(model != NULL, "load: %s", qf_last_error());
  if (model == NULL) return;
  CHECK(qf_model_vocab_size(model) == 512, "vocab %d", qf_model_vocab_size(model));
  CHECK(qf_model_context_length(model) == 2048, "context %d", qf_model_context_length(model));
  CHECK(contains(qf_model_description(model), "dim 64"), "%s", qf_model_description(model));

  /* Tokenize: the count first, then the tokens; BOS leads; the text comes back. */
  const char *prompt = "Once upon a time, there was a little girl";
  const int n = qf_tokenize(model, prompt, strlen(prompt), 1, NULL, 0);
  CHECK(n > 2, "%d tokens", n);
  int32_t tokens[64];
  CHECK(qf_tokenize(model, prompt, strlen(prompt), 1, tokens, 64) == n, "count changed");
  CHECK(tokens[0] == qf_model_bos(model), "first token %d", tokens[0]);
  char text[256];
  const int bytes = qf_detokenize(model, tokens, n, text, sizeof text);
  CHECK(bytes == (int)strlen(prompt) && strcmp(text, prompt) == 0, "detokenized '%s'", text);
  char small[8];
  CHECK(qf_detokenize(model, tokens, n, small, sizeof small) == bytes && strlen(small) == 7,
        "a short buffer gets a cut, terminated text");
  const int32_t bad[1] = {100000};
  CHECK(qf_detokenize(model, bad, 1, text, sizeof text) < 0, "token 100000 detokenized");
  CHECK(contains(qf_last_error(), "outside the vocabulary"), "error: %s", qf_last_error());

  /* One call of 48 tokens = a call of 20 then one of 28 with no new text (the 20th token
   * was pending, not yet in the cache). */
  qf_sequence *whole = qf_sequence_new(model, 0);
  CHECK(qf_sequence_context(whole) == 2048, "context %d", qf_sequence_context(whole));
  qf_sequence *parts = qf_sequence_new(model, 0);
  Collected a = {0}, b = {0};
  qf_generate_params g = greedy(48);
  CHECK(qf_generate(whole, prompt, &g, collect, &a, NULL) == 0, "%s", qf_last_error());
  g.max_tokens = 20;
  CHECK(qf_generate(parts, prompt, &g, collect, &b, NULL) == 0, "%s", qf_last_error());
  CHECK(qf_sequence_length(parts) == n + 20, "length %d", qf_sequence_length(parts));
  g.max_tokens = 28;
  CHECK(qf_generate(parts, "", &g, collect, &b, NULL) == 0, "%s", qf_last_error());
  CHECK(a.tokens == 48 && b.tokens == 48 && strcmp(a.text, b.text) == 0,
        "continued:\n%s\nwhole:\n%s", b.text, a.text);

  /* The callback stops generation; the sequence keeps what was generated. */
  qf_sequence_reset(parts);
  CHECK(qf_sequence_length(parts) == 0, "reset");
  Collected c = {0};
  c.limit = 5;
  qf_generate_stats stats;
  g = greedy(100);
  CHECK(qf_generate(parts, prompt, &g, collect, &c, &stats) == 0, "%s", qf_last_error());
  CHECK(stats.stop_reason == QF_STOP_CALLBACK && stats.generated_tokens == 5 && c.tokens == 5,
        "stop %d after %d", (int)stats.stop_reason, stats.generated_tokens);
  CHECK(qf_sequence_length(parts) == n + 5, "length %d", qf_sequence_length(parts));
  CHECK(strncmp(c.text, a.text, c.length) == 0, "the first 5 tokens differ: %s", c.text);

  /* A prompt that does not fit leaves the sequence as it was. */
  qf_sequence *tiny = qf_sequence_new(model, 8);
  CHECK(qf_sequence_context(tiny) == 8, "context %d", qf_sequence_context(tiny));
  CHECK(qf_generate(tiny, prompt, &g, NULL, NULL, NULL) < 0, "an overlong prompt ran");
  CHECK(contains(qf_last_error(), "does not fit"), "error: %s", qf_last_error());
  CHECK(qf_sequence_length(tiny) == 0, "length %d", qf_sequence_length(tiny));
  g.top_p = 0.f;
  CHECK(qf_generate(parts, "x", &g, NULL, NULL, NULL) < 0, "top_p 0 accepted");
  CHECK(contains(qf_last_error(), "top_p"), "error: %s", qf_last_error());

  /* Chat prompts in a named format and the model's own. */
  const char *roles[2] = {"system", "user"};
  const char *contents[2] = {"Be brief.", "Tell a story."};
  const int chat = qf_chat_prompt(model, "llama2", roles, contents, 2, text, sizeof text);
  CHECK(chat > 0 && contains(text, "[INST]") && contains(text, "Tell a story."), "%s", text);
  CHECK(qf_chat_prompt(model, "chatml", roles, contents, 2, text, sizeof text) > 0 &&
            contains(text, "<|im_start|>user\nTell a story."),
        "%s", text);
  CHECK(qf_chat_prompt(model, "vicuna", roles, contents, 2, text, sizeof text) < 0,
        "format vicuna accepted");
  CHECK(contains(qf_last_error(), "vicuna"), "error: %s", qf_last_error());
  const char *odd_role[1] = {"robot"};
  CHECK(qf_chat_prompt(model, NULL, odd_role, contents, 1, text, sizeof text) < 0,
        "role robot accepted");

  qf_sequence_free(tiny);
  qf_sequence_free(parts);
  qf_sequence_free(whole);
  qf_model_free(model);
}

int main(int argc, char **argv) {
  const char *env = getenv("QFORGE_MODELS");
  const char *dir = env != NULL && *env != '\0' ? env : argc > 1 ? argv[1] : "../shared/models";
  char path[4096];
  snprintf(path, sizeof path, "%s/stories260K/stories260K.gguf", dir);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(stderr, "test_capi: model file not found: %s (set QFORGE_MODELS)\n", path);
    return 1;
  }
  fclose(f);
  CHECK(qf_version()[0] != '\0', "no version");
  test_errors(path);
  test_greedy_story(path, "f32", 0);
  test_greedy_story(path, "int8", 60);
  test_model(path);
  if (failures > 0) {
    fprintf(stderr, "test_capi: %d checks failed\n", failures);
    return 1;
  }
  printf("test_capi: all checks passed (qforge %s)\n", qf_version());
  return 0;
}
