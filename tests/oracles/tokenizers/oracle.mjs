// Byte-level BPE tokenizers from npm, the independent reference of qforge's tokenizer
// tests (tests/model/test_bpe_tokenizer.cpp):
//
//   node oracle.mjs VOCAB CORPUS.json OUT.json
//
//   VOCAB  llama3  llama3-tokenizer-js: Llama 3's own vocabulary, merges and pattern
//          gpt2    js-tiktoken's GPT-2 ranks and pattern
//          qwen2   js-tiktoken's cl100k ranks under Qwen2's pattern (one digit per word)
//   CORPUS a JSON array of strings
//   OUT    { vocabulary: { pre, tokens, types, merges, bos, eos, eot, add_bos },
//            results: [ { ids, decoded } ] }   one result per corpus string; `decoded` is
//            the reference's decode of the ids that are not special tokens
//
// tiktoken vocabularies hold ranks, not merges; the merge of each token is derived as
// Hugging Face's conversion does it: the two parts left when byte-pair merging the
// token's bytes with only the ranks below its own.
import fs from 'node:fs';
import llama3Tokenizer from 'llama3-tokenizer-js';
import { Tiktoken } from 'js-tiktoken/lite';
import gpt2Ranks from 'js-tiktoken/ranks/gpt2';
import cl100kRanks from 'js-tiktoken/ranks/cl100k_base';

const [vocabName, corpusPath, outPath] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));

// GPT-2's bytes_to_unicode.
const byteToChar = (() => {
  const table = new Array(256);
  let shifted = 256;
  for (let b = 0; b < 256; ++b) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    table[b] = String.fromCodePoint(printable ? b : shifted++);
  }
  return table;
})();
const byteLevel = (bytes) => Array.from(bytes, (b) => byteToChar[b]).join('');
const latin1 = (bytes) => String.fromCharCode(...bytes);

// tiktoken ranks -> tokens in byte-level text, and derived merges in rank order.
function fromTiktoken(encoding) {
  const ranks = new Map();  // latin1 byte string -> rank
  let size = 0;
  for (const [rank, bytes] of encoding.textMap) {
    ranks.set(latin1(bytes), rank);
    size = Math.max(size, rank + 1);
  }
  const tokens = new Array(size).fill(null);
  const types = new Array(size).fill(1);
  const merges = [];
  for (const [rank, bytes] of encoding.textMap) {
    tokens[rank] = byteLevel(bytes);
    if (bytes.length < 2) continue;
    let parts = Array.from(bytes, (b) => String.fromCharCode(b));
    for (;;) {
      let best = -1, bestRank = rank;
      for (let i = 0; i + 1 < parts.length; ++i) {
        const r = ranks.get(parts[i] + parts[i + 1]);
        if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
      }
      if (best < 0) break;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
    }
    if (parts.length === 2) {
      const toLevel = (s) => byteLevel(Array.from(s, (c) => c.charCodeAt(0)));
      merges.push([rank, toLevel(parts[0]) + ' ' + toLevel(parts[1])]);
    }
  }
  merges.sort((a, b) => a[0] - b[0]);
  for (const [text, id] of Object.entries(encoding.specialTokens)) {
    while (tokens.length <= id) { tokens.push(null); types.push(1); }
    tokens[id] = text;
    types[id] = 3;  // control
  }
  for (let id = 0; id < tokens.length; ++id) {
    if (tokens[id] === null) { tokens[id] = `[PAD${id}]`; types[id] = 5; }  // unused
  }
  return { tokens, types, merges: merges.map((m) => m[1]) };
}

function tiktokenReference(ranks, pattern, pre, eosText) {
  const encoding = new Tiktoken({ ...ranks, pat_str: pattern });
  const vocabulary = fromTiktoken(encoding);
  const eos = encoding.specialTokens[eosText];
  Object.assign(vocabulary, { pre, bos: eos, eos, eot: -1, add_bos: false });
  const special = new Set(Object.values(encoding.specialTokens));
  return {
    vocabulary,
    encode: (text) => encoding.encode(text, 'all'),
    decode: (ids) => encoding.decode(ids.filter((id) => !special.has(id))),
  };
}

function llama3Reference() {
  const t = llama3Tokenizer;
  const merges = [...t.merges.entries()].sort((a, b) => a[1] - b[1]).map((m) => m[0]);
  const tokens = t.vocabById;
  const types = tokens.map((_, id) => (id >= 128000 ? 3 : 1));
  return {
    vocabulary: { pre: 'llama-bpe', tokens, types, merges, bos: 128000, eos: 128001, eot: 128009,
                  add_bos: true },
    encode: (text) => t.encode(text, { bos: false, eos: false }),
    decode: (ids) => t.decode(ids.filter((id) => id < 128000)),
  };
}

function reference(name) {
  if (name === 'llama3') return llama3Reference();
  if (name === 'gpt2') return tiktokenReference(gpt2Ranks, gpt2Ranks.pat_str, 'gpt-2', '<|endoftext|>');
  if (name === 'qwen2') {
    const pattern = cl100kRanks.pat_str.replace('\\p{N}{1,3}', '\\p{N}');
    if (pattern === cl100kRanks.pat_str) throw new Error('cl100k pattern changed: no \\p{N}{1,3}');
    return tiktokenReference(cl100kRanks, pattern, 'qwen2', '<|endoftext|>');
  }
  throw new Error(`unknown vocabulary '${name}' (llama3, gpt2, qwen2)`);
}

const ref = reference(vocabName);
const results = corpus.map((text) => {
  const ids = ref.encode(text);
  return { ids, decoded: ref.decode(ids) };
});
fs.writeFileSync(outPath, JSON.stringify({ vocabulary: ref.vocabulary, results }));
