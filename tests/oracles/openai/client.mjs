// Drives `qforge serve` with the official openai npm client and prints what it got as
// JSON on stdout, for tests/serve/test_openai_client.cpp to compare with `qforge run`.
//
//   node client.mjs BASE_URL API_KEY MODEL SCENARIO.json
//
// SCENARIO: { "completions": [{prompt, max_tokens}], "chat": [{content, max_tokens}],
//             "concurrent": [{prompt, max_tokens}] }
// Output:   { models, completions: [{text, streamed, finish_reason, usage}],
//             chat: [{content, streamed, finish_reason, usage}], concurrent: [text],
//             errors: {wrong_key, unknown_model, too_long, bad_field} }
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const [baseURL, apiKey, model, scenarioPath] = process.argv.slice(2);
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });

async function completion(c) {
  const whole = await client.completions.create({
    model, prompt: c.prompt, max_tokens: c.max_tokens, temperature: 0,
  });
  let streamed = "";
  let sawUsage = null;
  const stream = await client.completions.create({
    model, prompt: c.prompt, max_tokens: c.max_tokens, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    for (const choice of chunk.choices ?? []) streamed += choice.text ?? "";
    if (chunk.usage) sawUsage = chunk.usage;
  }
  return {
    text: whole.choices[0].text, streamed, finish_reason: whole.choices[0].finish_reason,
    usage: whole.usage, stream_usage: sawUsage, object: whole.object,
  };
}

async function chat(c) {
  const messages = [{ role: "user", content: c.content }];
  const whole = await client.chat.completions.create({
    model, messages, max_tokens: c.max_tokens, temperature: 0,
  });
  let streamed = "";
  let role = null;
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: c.max_tokens, temperature: 0, stream: true,
  });
  for await (const chunk of stream) {
    for (const choice of chunk.choices ?? []) {
      streamed += choice.delta?.content ?? "";
      role ??= choice.delta?.role ?? null;
    }
  }
  return {
    content: whole.choices[0].message.content, role: whole.choices[0].message.role, streamed,
    stream_role: role, finish_reason: whole.choices[0].finish_reason, usage: whole.usage,
    object: whole.object,
  };
}

// The status and error code a refused request gets, as the client raises it.
async function refusal(call) {
  try {
    await call();
    return { status: 0 };
  } catch (e) {
    return { status: e.status ?? -1, code: e.code ?? null, type: e.type ?? null,
             name: e.constructor.name };
  }
}

const out = {};
out.models = (await client.models.list()).data.map((m) => m.id);
out.completions = [];
for (const c of scenario.completions) out.completions.push(await completion(c));
out.chat = [];
for (const c of scenario.chat) out.chat.push(await chat(c));
// Several clients at once, streaming and not, each with its own prompt and length.
out.concurrent = await Promise.all(scenario.concurrent.map(async (c, i) => {
  if (i % 2 === 0) {
    const r = await client.completions.create({
      model, prompt: c.prompt, max_tokens: c.max_tokens, temperature: 0 });
    return r.choices[0].text;
  }
  let text = "";
  const stream = await client.completions.create({
    model, prompt: c.prompt, max_tokens: c.max_tokens, temperature: 0, stream: true });
  for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
  return text;
}));
const wrongKey = new OpenAI({ baseURL, apiKey: "not-the-key", maxRetries: 0 });
out.errors = {
  wrong_key: await refusal(() => wrongKey.completions.create({ model, prompt: "a" })),
  unknown_model: await refusal(() => client.completions.create({ model: "gpt-4", prompt: "a" })),
  too_long: await refusal(() => client.completions.create({
    model, prompt: "Lily ".repeat(2000), max_tokens: 4 })),
  bad_field: await refusal(() => client.completions.create({
    model, prompt: "a", max_tokens: "many" })),
};
process.stdout.write(JSON.stringify(out));
