// A bounded load test for any OpenAI-compatible server (qforge serve, llama-server):
// `requests` streamed completions, `streams` of them in flight at a time, each asking for
// `max_tokens` tokens after the same prompt; stops early at `time_limit` seconds.
//
//   node bench/serve_load.mjs --url http://127.0.0.1:8080 [--model ID] [--streams 8]
//        [--requests 16] [--max-tokens 64] [--prompt-words 32] [--time-limit 300]
//
// Prints one JSON line: aggregate decode tokens/s (tokens streamed / wall time), time to
// first token and per-token latency (gap between streamed tokens) p50/p99, in seconds.
// Node's own fetch; nothing to install.
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, a, i, all) =>
    (a.startsWith("--") ? [...pairs, [a.slice(2), all[i + 1]]] : pairs), []));
const url = args.url ?? "http://127.0.0.1:8080";
const model = args.model ?? "default";
const streams = Number(args.streams ?? 8);
const requests = Number(args.requests ?? 2 * streams);
const maxTokens = Number(args["max-tokens"] ?? 64);
const promptWords = Number(args["prompt-words"] ?? 32);
const timeLimit = Number(args["time-limit"] ?? 300) * 1000;
const words = ["the", "little", "dog", "ran", "to", "a", "big", "red", "house", "and", "sat"];

const percentile = (values, p) => {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

// One streamed completion: the time of every chunk that carried text.
async function one(index, deadline) {
  const prompt = Array.from({ length: promptWords }, (_, i) => words[(i * 7 + index) % words.length]).join(" ");
  const start = performance.now();
  const response = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: maxTokens, temperature: 0, stream: true }),
    signal: AbortSignal.timeout(Math.max(1, deadline - Date.now())),
  });
  if (!response.ok) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
  const times = [];
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.replace(/^data: /, "");
      if (!event.startsWith("data: ") || data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      const text = chunk.choices?.[0]?.text ?? chunk.content ?? "";
      if (text.length > 0) times.push(performance.now());
    }
  }
  return { start, times };
}

const deadline = Date.now() + timeLimit;
const results = [];
let next = 0;
const wallStart = performance.now();
await Promise.all(Array.from({ length: streams }, async () => {
  while (next < requests && Date.now() < deadline) results.push(await one(next++, deadline));
}));
const wall = (performance.now() - wallStart) / 1000;
const tokens = results.reduce((n, r) => n + r.times.length, 0);
const ttft = results.filter((r) => r.times.length > 0).map((r) => (r.times[0] - r.start) / 1000);
const gaps = results.flatMap((r) => r.times.slice(1).map((t, i) => (t - r.times[i]) / 1000));
console.log(JSON.stringify({
  url, streams, requests: results.length, max_tokens: maxTokens, prompt_words: promptWords,
  tokens, wall_s: +wall.toFixed(2), aggregate_tok_s: +(tokens / wall).toFixed(2),
  ttft_p50_s: percentile(ttft, 50), ttft_p99_s: percentile(ttft, 99),
  token_latency_p50_s: percentile(gaps, 50), token_latency_p99_s: percentile(gaps, 99),
}));
