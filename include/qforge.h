/* qforge's C API: load a model (quantized and packed, every kernel JIT-compiled for this
 * CPU at load time), tokenize and detokenize, and generate text on sequences that each
 * keep their own KV cache.
 *
 *   qf_model_params p = qf_model_default_params();
 *   p.quant = "int8";
 *   qf_model *model = qf_model_load("stories260K.gguf", &p);       NULL: see qf_last_error()
 *   qf_sequence *seq = qf_sequence_new(model, 0);                  0: the model's context
 *   qf_generate_params g = qf_generate_default_params();
 *   g.temperature = 0.f;
 *   qf_generate(seq, "Once upon a time", &g, on_token, user, &stats);
 *   qf_generate(seq, " The end.", &g, on_token, user, &stats);     continues the same cache
 *   qf_sequence_free(seq);
 *   qf_model_free(model);
 *
 * Errors: a function that fails returns NULL or a negative number and leaves a message
 * naming the file or field at fault in qf_last_error() (per thread). No function throws or
 * aborts on bad input.
 *
 * Threads: a model's sequences share its thread pool, so qf_generate calls on one model
 * run one at a time (calls from several threads are safe: they wait for each other).
 * Sequences of different models run in parallel. The ISA cap and the tuning database are
 * per process (the latest model load sets them, when its params name them).
 *
 * Link with -lqforge (build/libqforge.so). */
#ifndef QFORGE_H
#define QFORGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QF_API __attribute__((visibility("default")))

typedef struct qf_model qf_model;
typedef struct qf_sequence qf_sequence;

/* The message of the last call on this thread that failed ("" if none did). */
QF_API const char* qf_last_error(void);

/* qforge's version, "MAJOR.MINOR.PATCH". */
QF_API const char* qf_version(void);

/* ---- models ------------------------------------------------------------------------ */

typedef struct qf_model_params {
  /* Strings as the qforge command line takes them; NULL or "" = the default. */
  const char* quant;       /* f32 | bf16 | int8 | int8-g<G>[-asym] | int4-g<G>[-asym] | native |
                              woq-<scheme> (default: native for a quantized GGUF, else int8) */
  const char* lm_head;     /* int8 | bf16 | f32 */
  const char* kv;          /* KV cache: f32 | bf16 | int8 */
  const char* preset;      /* keep-ends | keep-ends-bf16 | down-int8 */
  const char* const* keep; /* PATTERN[=f32|bf16], n_keep of them */
  int n_keep;
  const char* const* tensor_types; /* PATTERN=SCHEME, n_tensor_types of them, after keep */
  int n_tensor_types;
  const char* tokenizer; /* llama2.c tokenizer.bin (default: beside a .bin model) */
  const char* max_isa;   /* cap the kernels: avx2 | avx-vnni | avx512-vnni | amx */
  const char* tuning;    /* "auto": the database `qforge tune` wrote for this CPU, if any;
                            "none": analytic blockings; else a database's path;
                            NULL or "": leave the process's tuning as it is */
  int threads;           /* 0: the physical cores */
  /* Called as layers are packed (done of total); NULL: none. */
  void (*progress)(int done, int total, void* user);
  void* progress_user;
} qf_model_params;

QF_API qf_model_params qf_model_default_params(void);

/* Loads a GGUF or llama2.c model. NULL on failure (qf_last_error names the file or field). */
QF_API qf_model* qf_model_load(const char* path, const qf_model_params* params);
/* Frees the model; its sequences must be freed first. NULL is a no-op. */
QF_API void qf_model_free(qf_model* model);

QF_API int qf_model_vocab_size(const qf_model* model);
QF_API int qf_model_context_length(const qf_model* model); /* the model's own */
QF_API int qf_model_bos(const qf_model* model);
QF_API int qf_model_eos(const qf_model* model);
/* One line: dims, precision, kernel ISA and threads ("dim 288, 6 layers, ...; int8 ...");
 * owned by the model. */
QF_API const char* qf_model_description(const qf_model* model);

/* ---- text <-> tokens --------------------------------------------------------------- */

/* Encodes `length` bytes of `text` (special tokens such as <|eot_id|> are parsed), with
 * the BOS the vocabulary asks for when `add_bos` is non-zero. Returns the token count:
 * the first min(count, capacity) are written to `tokens`. Negative on error. */
QF_API int qf_tokenize(const qf_model* model, const char* text, size_t length, int add_bos,
                       int32_t* tokens, int capacity);

/* The text of `n` tokens (as generation prints it: a SentencePiece piece after BOS loses
 * its leading space, byte tokens become their bytes). Returns the byte count; writes at
 * most capacity - 1 bytes and a NUL when capacity > 0. Negative on error. */
QF_API int qf_detokenize(const qf_model* model, const int32_t* tokens, int n, char* text,
                         size_t capacity);

/* The prompt for `n` chat messages (roles "system", "user", "assistant") in chat format
 * `format` ("llama2", "llama3" or "chatml"; NULL or "": the model's, from its chat template
 * or special tokens), ending with the assistant's turn opened. Returns the byte count,
 * written as qf_detokenize writes. */
QF_API int qf_chat_prompt(const qf_model* model, const char* format, const char* const* roles,
                          const char* const* contents, int n, char* text, size_t capacity);

/* ---- sequences and generation ------------------------------------------------------ */

/* A sequence with a KV cache of `context` positions (0 or more than the model's: the
 * model's own). NULL on failure. */
QF_API qf_sequence* qf_sequence_new(qf_model* model, int context);
QF_API void qf_sequence_free(qf_sequence* sequence);
/* Tokens the sequence holds (prompts and generated tokens so far). */
QF_API int qf_sequence_length(const qf_sequence* sequence);
QF_API int qf_sequence_context(const qf_sequence* sequence);
/* Forgets every token: the next qf_generate starts from an empty cache. */
QF_API void qf_sequence_reset(qf_sequence* sequence);

typedef struct qf_generate_params {
  int max_tokens;    /* tokens to generate at most (fewer when the context runs out) */
  float temperature; /* 0: greedy */
  int top_k;         /* 0: off */
  float top_p;       /* 1: off */
  uint64_t seed;
  int echo_prompt; /* non-zero: the prompt's own text is passed to the callback first */
} qf_generate_params;

QF_API qf_generate_params qf_generate_default_params(void);

/* Called for every generated token with the text it completes (well-formed UTF-8: empty
 * while a character is incomplete; `token` is -1 for echoed prompt text and for text
 * flushed at the end). Return non-zero to stop generating. */
typedef int (*qf_token_callback)(const char* text, size_t length, int32_t token, void* user);

typedef enum qf_stop_reason {
  QF_STOP_END_OF_TEXT = 0, /* the model ended (EOS, end of turn or BOS) */
  QF_STOP_LENGTH = 1,      /* max_tokens generated, or the context is full */
  QF_STOP_CALLBACK = 2     /* the callback returned non-zero */
} qf_stop_reason;

typedef struct qf_generate_stats {
  int prompt_tokens;    /* tokens of `prompt` run (with BOS on an empty sequence) */
  int generated_tokens; /* tokens passed to the callback */
  int decode_tokens;    /* one-token forwards: generated tokens fed back */
  double prefill_seconds;
  double decode_seconds;
  qf_stop_reason stop_reason;
} qf_generate_stats;

/* Appends `prompt` to the sequence (BOS first on an empty one, when the vocabulary asks
 * for it; "" on an empty sequence: BOS only) and generates after it, calling `callback`
 * (may be NULL) for each token. `stats` may be NULL. The generated tokens stay in the
 * sequence, so a second call continues the text. Returns 0, or negative on error (the
 * prompt does not fit the context: the sequence is left as it was). */
QF_API int qf_generate(qf_sequence* sequence, const char* prompt, const qf_generate_params* params,
                       qf_token_callback callback, void* user, qf_generate_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* QFORGE_H */
