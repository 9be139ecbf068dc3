// qforge bench -m MODEL [-p 128] [-n 32] [-r 5] [-t N] [--quant Q[,Q...]] [-f TEXT]
//              [--paired-read] [--json]
//
// Like llama-bench: for each precision, load the model (quantize, pack, JIT), then r times
// prefill a prompt of p tokens as one batch and decode n tokens one by one; report the
// medians. Each precision runs in its own child process, so peak RSS and load times are
// its own. Decode bandwidth is stated against the machine's read bandwidth, sampled in the
// parent right before and right after each precision's child (the better of the two: a
// shared host's bandwidth drifts over a run of several minutes). With --paired-read the
// child also reads the bytes of a decode step plainly, with the same pool, after every
// timed step (ops/tune/paired_read.h): bw_ratio_paired is decode against that read, step
// by step (the median of the per-step ratios).
//
//   parent: per precision: read GB/s -> fork -> collect one JSON line -> read GB/s; print
//   child:  load -> warm-up pass -> r x (prefill p, decode n [each step: probe]) ->
//           [perplexity of -f TEXT]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/text_file.h"
#include "jit/base/error.h"
#include "jit/cpu/isa.h"
#include "jit/tune/machine_limits.h"
#include "model/format/model_file.h"
#include "model/runtime/model_session.h"
#include "model/runtime/perplexity.h"
#include "ops/tune/paired_read.h"

namespace qforge::cli {
namespace {

struct Options {
  ModelOptions model;
  int n_prompt = 128;
  int n_gen = 32;
  int repetitions = 5;
  int parallel = 1;  // > 1: also decode this many sequences batched
  std::vector<std::string> quants;
  std::string text;
  bool paired_read = false;
  bool json = false;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

std::uint64_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

// A prompt of BOS + deterministic tokens spread over the vocabulary (ids >= 3).
std::vector<int> bench_prompt(int length, int vocab) {
  std::vector<int> tokens = {1};
  std::uint64_t state = 0x9e3779b97f4a7c15ULL;
  while (static_cast<int>(tokens.size()) < length) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    tokens.push_back(3 + static_cast<int>((state >> 33) % std::uint64_t(std::max(1, vocab - 3))));
  }
  return tokens;
}

int argmax(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Aggregate decode tokens/s of `sequences` sequences decoded together (one batched
// forward per step, M = sequences), each after the same prompt: r timed runs, the median.
std::vector<double> batched_decode_rates(LlamaWeights& weights, ThreadPool& pool, const Options& o,
                                         const std::vector<int>& prompt, int sequences) {
  LlamaExecutor executor(weights, pool, o.n_prompt + o.n_gen + 1, sequences);
  std::vector<BatchToken> batch;
  std::vector<double> rates;
  for (int run = -1; run < o.repetitions; ++run) {  // run -1: warm-up, not recorded
    batch.clear();
    for (int s = 0; s < sequences; ++s)
      for (std::size_t p = 0; p < prompt.size(); ++p)
        batch.push_back({prompt[p], s, static_cast<int>(p), p + 1 == prompt.size()});
    std::span<const float> logits = executor.forward_batch(batch);
    const auto vocab = static_cast<std::size_t>(executor.vocab_size());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < o.n_gen; ++i) {
      batch.clear();
      for (int s = 0; s < sequences; ++s)
        batch.push_back({argmax(logits.subspan(s * vocab, vocab)), s,
                         static_cast<int>(prompt.size()) + i, true});
      logits = executor.forward_batch(batch);
    }
    if (run >= 0) rates.push_back(sequences * o.n_gen / seconds_since(start));
  }
  return rates;
}

// One precision, in the child process: returns the JSON record.
nlohmann::json bench_one(const Options& o, const std::string& quant, int threads,
                         const TuningStatus& tuning) {
  const Precision precision = model_precision(o.model, quant);
  // With -f TEXT the cache also holds a perplexity chunk (up to 512 tokens).
  const int positions = o.n_prompt + o.n_gen + 1;
  // The calibrated methods (--gptq, --act static, ...) apply to the quantized precisions.
  auto session = open_model_session(o.model, precision, threads,
                                    o.text.empty() ? positions : std::max(positions, 512), o.json,
                                    /*with_methods=*/precision.quantized);
  LlamaExecutor& executor = *session->executor;
  const LoadedModel& model = session->model;
  const LlamaConfig& c = model.weights.config;
  QF_REQUIRE(o.n_prompt + o.n_gen <= executor.positions(), "bench: -p ", o.n_prompt, " + -n ",
             o.n_gen, " exceeds the model's context of ", executor.positions());
  const std::vector<int> prompt = bench_prompt(std::max(1, o.n_prompt), c.vocab_size);

  std::vector<double> prefill, decode;
  std::vector<double> probed_steps;  // the seconds of each step a probe followed
  // The paired read's buffer (as many bytes as a decode step reads) comes after the
  // warm-up pass; with it the peak RSS reported is the one taken before it (the executor
  // allocates nothing after its first pass), without it the one at the end.
  std::uint64_t peak_rss_before_probe = 0;
  std::unique_ptr<PairedReadProbe> probe;
  for (int run = -1; run < o.repetitions; ++run) {  // run -1: warm-up, not recorded
    auto start = std::chrono::steady_clock::now();
    int next = argmax(executor.forward(prompt, 0));
    const double prefill_seconds = seconds_since(start);
    double decode_seconds = 0;
    for (int i = 0; i < o.n_gen; ++i) {
      start = std::chrono::steady_clock::now();
      next = argmax(executor.forward(std::span<const int>(&next, 1), o.n_prompt + i));
      const double step_seconds = seconds_since(start);
      decode_seconds += step_seconds;
      if (probe) {
        probe->probe(i);
        probed_steps.push_back(step_seconds);
      }
    }
    if (run < 0) {
      if (o.paired_read && o.n_gen > 0) {
        peak_rss_before_probe = peak_rss_bytes();
        probe = std::make_unique<PairedReadProbe>(model.weights.decode_bytes_per_token(), 1,
                                                  *session->pool);
      }
      continue;
    }
    if (o.n_prompt > 0) prefill.push_back(o.n_prompt / prefill_seconds);
    if (o.n_gen > 0) decode.push_back(o.n_gen / decode_seconds);
  }

  nlohmann::json j = {
      {"model", o.model.model},
      {"quant", quant.empty() ? "native" : quant},
      {"precision", to_string(precision)},
      {"isa", model.weights.has_jit_layers() ? std::string(isa_name(best_isa())) : "onednn"},
      {"threads", threads},
      {"n_prompt", o.n_prompt},
      {"n_gen", o.n_gen},
      {"prefill_tok_s", median(prefill)},
      {"decode_tok_s", median(decode)},
      {"samples", {{"prefill_tok_s", prefill}, {"decode_tok_s", decode}}},
      {"load_ms", model.load_seconds * 1e3},
      {"pack_ms", model.pack_seconds * 1e3},
      {"jit_ms", model.jit_seconds * 1e3},
      {"kernels", model.kernels},
      {"weight_bytes", model.weights.weight_bytes()},
      {"embedding_bytes", model.weights.embedding.bytes()},
      {"decode_bytes_per_token", model.weights.decode_bytes_per_token()},
      {"linear_parameters", model.weights.linear_parameters()},
      {"kv_cache_bytes", executor.cache().bytes()},
      {"peak_rss_bytes", probe ? peak_rss_before_probe : peak_rss_bytes()}};
  if (probe) {
    j["paired_read_gbps"] = probe->gbps();
    j["bw_ratio_paired"] =
        probe->paired_ratio(double(model.weights.decode_bytes_per_token()), probed_steps);
  }
  const std::vector<GemmKey> keys = model.weights.warmup_keys();
  j["tuning"] = tuning_summary(tuning, keys);
  j["policy"] = policy_summary(model.weights);
  j["prefill_on_amx"] =
      std::any_of(keys.begin(), keys.end(), [](const GemmKey& key) { return key.isa == Isa::amx; });
  // Weight-only int4 on tiles: AMX-BF16 (tdpbf16ps), whose peak is the limit instead.
  j["prefill_on_amx_bf16"] = std::any_of(keys.begin(), keys.end(), [](const GemmKey& key) {
    return key.isa == Isa::amx && key.activation == ActivationKind::bf16;
  });
  if (o.parallel > 1 && o.n_gen > 0) {
    const std::vector<double> rates =
        batched_decode_rates(session->model.weights, *session->pool, o, prompt, o.parallel);
    j["parallel"] = o.parallel;
    j["parallel_decode_tok_s"] = median(rates);
    j["samples"]["parallel_decode_tok_s"] = rates;
    j["parallel_speedup"] = median(decode) > 0 ? median(rates) / median(decode) : 0.0;
  }
  if (!o.text.empty()) {
    const std::vector<int> tokens =
        model.tokenizer.encode(read_text_file(o.text), model.tokenizer.adds_bos(), false);
    const int ctx = std::min(512, executor.positions());
    const PerplexityResult r = evaluate_perplexity(
        tokens, ctx, c.vocab_size, model.tokenizer.prompt_bos_id(),
        [&executor](std::span<const int> chunk) { return executor.forward(chunk, 0, true); });
    j["perplexity"] = r.perplexity;
    j["perplexity_ctx"] = ctx;
  }
  return j;
}

// Runs bench_one in a child process; its record comes back through a pipe.
nlohmann::json bench_in_child(const Options& o, const std::string& quant, int threads,
                              const TuningStatus& tuning) {
  int fds[2];
  if (pipe(fds) != 0) fail("bench: pipe failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) fail("bench: fork failed");
  if (pid == 0) {
    close(fds[0]);
    int status = 0;
    std::string out;
    try {
      out = bench_one(o, quant, threads, tuning).dump();
    } catch (const std::exception& e) {
      out = nlohmann::json{{"error", e.what()}}.dump();
      status = 1;
    }
    out += "\n";
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t wrote = write(fds[1], out.data() + done, out.size() - done);
      if (wrote <= 0) break;
      done += static_cast<std::size_t>(wrote);
    }
    close(fds[1]);
    _exit(status);
  }
  close(fds[1]);
  std::string reply;
  char buffer[4096];
  for (ssize_t got; (got = read(fds[0], buffer, sizeof buffer)) > 0;) reply.append(buffer, got);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (reply.empty())
    fail("bench: --quant ", quant, ": the benchmark process died (",
         WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status)) : "no output", ")");
  nlohmann::json j = nlohmann::json::parse(reply);
  if (j.contains("error")) fail(j["error"].get<std::string>());
  return j;
}

std::string mib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", bytes / (1 << 20));
  return text;
}

void print_table(const std::vector<nlohmann::json>& rows) {
  const nlohmann::json* f32 = nullptr;
  for (const auto& r : rows)
    if (r["quant"] == "f32") f32 = &r;
  std::printf("| %-12s | %-12s | %3s | %10s | %10s | %8s | %8s | %10s | %10s | %16s | %8s |\n",
              "quant", "isa", "t", "pp tok/s", "tg tok/s", "tg GB/s", "bw ratio", "weights MiB",
              "peak RSS MiB", "PPL", "vs f32");
  std::printf("|%s|\n", std::string(143, '-').c_str());
  for (const auto& r : rows) {
    const double tg = r["decode_tok_s"].get<double>();
    const double gbps = tg * r["decode_bytes_per_token"].get<double>() / 1e9;
    std::string ppl = "-", speedup = "-";
    char text[64];
    if (r.contains("perplexity")) {
      const double p = r["perplexity"].get<double>();
      if (f32 && f32 != &r && f32->contains("perplexity"))
        std::snprintf(text, sizeof text, "%.3f (%+.2f%%)", p,
                      100.0 * (p / (*f32)["perplexity"].get<double>() - 1.0));
      else
        std::snprintf(text, sizeof text, "%.3f", p);
      ppl = text;
    }
    if (f32 && (*f32)["decode_tok_s"].get<double>() > 0) {
      std::snprintf(text, sizeof text, "%.2fx", tg / (*f32)["decode_tok_s"].get<double>());
      speedup = text;
    }
    std::printf(
        "| %-12s | %-12s | %3d | %10.2f | %10.2f | %8.2f | %8.3f | %11s | %12s | %16s | %8s |\n",
        r["quant"].get<std::string>().c_str(), r["isa"].get<std::string>().c_str(),
        r["threads"].get<int>(), r["prefill_tok_s"].get<double>(), tg, gbps,
        r["bw_ratio"].get<double>(), mib(r["weight_bytes"].get<double>()).c_str(),
        mib(r["peak_rss_bytes"].get<double>()).c_str(), ppl.c_str(), speedup.c_str());
  }
  for (const auto& r : rows)
    if (r.contains("parallel"))
      std::printf(
          "%s decode of %d sequences batched: %.2f tok/s in all, %.2fx one sequence's rate\n",
          r["quant"].get<std::string>().c_str(), r["parallel"].get<int>(),
          r["parallel_decode_tok_s"].get<double>(), r["parallel_speedup"].get<double>());
  for (const auto& r : rows)
    std::printf("%s policy: %s\n", r["quant"].get<std::string>().c_str(),
                r["policy"].get<std::string>().c_str());
  for (const auto& r : rows)
    std::printf(
        "%s decode reads %.1f MB per token; the file's tensors hold %.1f MB per token "
        "(%.3fx)\n",
        r["quant"].get<std::string>().c_str(), r["decode_bytes_per_token"].get<double>() / 1e6,
        r["file_bytes_per_token"].get<double>() / 1e6, r["bytes_per_token_ratio"].get<double>());
  for (const auto& r : rows)
    std::printf(
        "%s read bandwidth: %.2f GB/s before its run, %.2f GB/s after (the better one "
        "is the bw ratio's limit)\n",
        r["quant"].get<std::string>().c_str(), r["read_gbps_before"].get<double>(),
        r["read_gbps_after"].get<double>());
  for (const auto& r : rows)
    if (r.contains("bw_ratio_paired"))
      std::printf(
          "%s decode: %.2f GB/s; step by step %.3f of a plain read of the same bytes after "
          "each step (medians: %.3f of %.2f GB/s)\n",
          r["quant"].get<std::string>().c_str(), r["decode_gbps"].get<double>(),
          r["bw_ratio_paired"].get<double>(), r["bw_ratio_paired_medians"].get<double>(),
          r["paired_read_gbps"].get<double>());
  for (const auto& r : rows) {
    std::printf("%s prefill: %.1f GOPS = %.3f of the %s peak (%.1f GOPS)",
                r["quant"].get<std::string>().c_str(), r["prefill_gops"].get<double>(),
                r["prefill_peak_ratio"].get<double>(),
                r["dot_peak_instruction"].get<std::string>().c_str(),
                r["dot_peak_gops"].get<double>());
    if (r.contains("amx_peak_ratio"))
      std::printf("; %.3f of the tdpbsud peak (%.1f GOPS)", r["amx_peak_ratio"].get<double>(),
                  r["amx_peak_gops"].get<double>());
    if (r.contains("amx_bf16_peak_ratio"))
      std::printf("; %.3f of the tdpbf16ps peak (%.1f GFLOPS)",
                  r["amx_bf16_peak_ratio"].get<double>(), r["amx_bf16_peak_gflops"].get<double>());
    std::printf("; %.3f of the %s peak (%.1f GFLOPS)", r["prefill_fma_ratio"].get<double>(),
                r["fma_peak_instruction"].get<std::string>().c_str(),
                r["fma_peak_gflops"].get<double>());
    if (r.contains("prefill_bf16_ratio"))
      std::printf("; %.3f of the vdpbf16ps zmm peak (%.1f GFLOPS)",
                  r["prefill_bf16_ratio"].get<double>(), r["bf16_peak_gflops"].get<double>());
    std::printf("\n");
  }
}

void bench(Options o) {
  const AppliedModelOptions applied = apply_model_options(o.model);
  const int threads = applied.threads;
  if (o.quants.empty()) o.quants = {""};
  for (const std::string& quant : o.quants) model_precision(o.model, quant);  // validate
  // The method flags too, once, before any child runs (dense precisions skip them).
  method_preparer(o.model.methods, parse_precision("int8"), 1, /*quiet=*/true);
  // The machine's int8 dot-product peak, before any child starts, and its read bandwidth
  // around each child (the measuring threads are joined: safe to fork).
  const double peak_gops = dot_peak_gops(threads);
  const double fma_peak = fma_peak_gflops(threads);    // weight-only and f32 prefill's limit
  const double bf16_peak = bf16_peak_gflops(threads);  // bf16 weight-only's (0: not native)
  std::string amx_missing, amx_bf16_missing;
  const double amx_peak = amx_peak_gops(threads, 2'000'000, &amx_missing);
  const double amx_bf16_peak = amx_bf16_peak_gflops(threads, 2'000'000, &amx_bf16_missing);
  std::vector<nlohmann::json> rows;
  // One sample between consecutive children serves as the first one's "after" and the
  // next one's "before".
  double read_after = sample_read_bandwidth_gbps(threads);
  const std::uint64_t file_bytes_per_token = open_model(o.model.model).bytes_per_token();
  for (const std::string& quant : o.quants) {
    const double read_before = read_after;
    nlohmann::json r = bench_in_child(o, quant, threads, applied.tuning);
    read_after = sample_read_bandwidth_gbps(threads);
    const double read_gbps = std::max(read_before, read_after);
    r["file_bytes_per_token"] = file_bytes_per_token;
    r["bytes_per_token_ratio"] =
        r["decode_bytes_per_token"].get<double>() / double(file_bytes_per_token);
    r["read_gbps_before"] = read_before;
    r["read_gbps_after"] = read_after;
    const double gbps =
        r["decode_tok_s"].get<double>() * r["decode_bytes_per_token"].get<double>() / 1e9;
    r["read_gbps"] = read_gbps;
    r["decode_gbps"] = gbps;
    r["bw_ratio"] = read_gbps > 0 ? gbps / read_gbps : 0.0;
    if (r.contains("paired_read_gbps"))  // the two series' medians, beside the per-step ratio
      r["bw_ratio_paired_medians"] = gbps / r["paired_read_gbps"].get<double>();
    // Whole-forward prefill throughput: 2 x linear parameters x tokens / time.
    const double prefill_gops =
        2.0 * r["linear_parameters"].get<double>() * r["prefill_tok_s"].get<double>() / 1e9;
    r["dot_peak_gops"] = peak_gops;
    r["dot_peak_instruction"] = dot_peak_instruction();
    r["prefill_gops"] = prefill_gops;
    r["prefill_peak_ratio"] = peak_gops > 0 ? prefill_gops / peak_gops : 0.0;
    // Weight-only (and f32) prefill multiplies in floating point: the FMA peak is its limit.
    r["fma_peak_gflops"] = fma_peak;
    r["fma_peak_instruction"] = fma_peak_instruction();
    r["prefill_fma_ratio"] = fma_peak > 0 ? prefill_gops / fma_peak : 0.0;
    // ... and vdpbf16ps's where AVX512-BF16 runs natively (int4 weight-only layers use it).
    r["bf16_peak_gflops"] = bf16_peak;
    if (bf16_peak > 0) r["prefill_bf16_ratio"] = prefill_gops / bf16_peak;
    // On AMX hosts prefill runs on tiles: its limit is the tdpbsud peak.
    // Weight-only int4 prefill on tiles: the tdpbf16ps peak.
    r["amx_peak_gops"] = amx_peak;
    r["amx_bf16_peak_gflops"] = amx_bf16_peak;
    if (r["prefill_on_amx_bf16"].get<bool>() && amx_bf16_peak > 0)
      r["amx_bf16_peak_ratio"] = prefill_gops / amx_bf16_peak;
    else if (r["prefill_on_amx"].get<bool>() && amx_peak > 0)
      r["amx_peak_ratio"] = prefill_gops / amx_peak;
    else
      r["amx_peak_missing"] = amx_peak > 0 ? "prefill does not run on AMX" : amx_missing;
    if (!r.contains("amx_bf16_peak_ratio") && amx_bf16_peak <= 0)
      r["amx_bf16_peak_missing"] = amx_bf16_missing;
    if (o.json) {
      std::printf("%s\n", r.dump().c_str());
      std::fflush(stdout);
    }
    rows.push_back(std::move(r));
  }
  if (!o.json) {
    print_table(rows);
    if (!rows.empty()) std::printf("%s\n", rows.front()["tuning"].get<std::string>().c_str());
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto options = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("bench", "Prefill and decode speed per precision (llama-bench)");
  add_model_options(cmd, options->model, /*with_quant=*/false);
  add_method_options(cmd, options->model.methods);
  cmd->add_option("-p,--n-prompt", options->n_prompt, "Prompt tokens (default 128)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-n,--n-gen", options->n_gen, "Generated tokens (default 32)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-r,--repetitions", options->repetitions, "Repetitions (default 5)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--quant", options->quants,
                  "Precisions, comma-separated: f32,bf16,int8,int4-g128,native,...")
      ->delimiter(',');
  cmd->add_option("--parallel", options->parallel,
                  "Also decode this many sequences together, one batched forward per step "
                  "(continuous batching), and report the aggregate tokens/s")
      ->check(CLI::Range(1, 64));
  cmd->add_option("-f,--file", options->text, "Text file: also report each precision's perplexity");
  cmd->add_flag("--paired-read", options->paired_read,
                "After every timed decode step, read as many bytes plainly with the same "
                "threads, and report decode against that read (bw_ratio_paired): for hosts "
                "whose bandwidth drifts within a run");
  cmd->add_flag("--json", options->json, "One JSON object per precision on stdout");
  cmd->callback([options] { bench(*options); });
}

}  // namespace qforge::cli
