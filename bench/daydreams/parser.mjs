// Parser throughput: bench/fixtures/response_16k.txt (written by bench/corpus.py,
// the same bytes the hub's parser reads) cut into N-character chunks, through
// Daydreams' handleStream exactly as its agent wires it: the tags and handlers of
// createContextStreamHandler, an async iterable of text chunks. The agent's
// pushLog goes into its engine; here it only counts, so this is the parser alone.
// Also reported: xmlStreamParser (the synchronous tokenizer under handleStream).
// Usage: node bench/daydreams/parser.mjs --chunks 1,8,32 --reps 30
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { handleStream, createContextStreamHandler, xmlStreamParser } from "@daydreamsai/core";
import { parseArgs, assert, emit, quantile } from "./common.mjs";

const defaultFixture = fileURLToPath(new URL("../fixtures/response_16k.txt", import.meta.url));
const args = parseArgs({ chunks: "1,8,32", reps: 30, warmup: 5, fixture: defaultFixture });
const text = readFileSync(args.fixture, "utf8");
const units = text.split("</response>").length - 1;
assert(units > 0, "the fixture has no <response> units");

function cut(s, n) {
  const out = [];
  for (let i = 0; i < s.length; i += n) out.push(s.slice(i, i + n));
  return out;
}

async function* iterate(chunks) {
  for (const c of chunks) yield c;
}

async function runHandleStream(chunks) {
  const done = { action_call: 0, output: 0, thought: 0 };
  let pushes = 0, events = 0;
  const { streamHandler, tags, __streamChunkHandler } = createContextStreamHandler({
    pushLog(log, isDone) {
      pushes++;
      if (isDone) done[log.ref] = (done[log.ref] ?? 0) + 1;
    },
    __pushLogChunk() {
      events++;
    },
  });
  await handleStream(iterate(chunks), 0, tags, (el) => streamHandler(el), (c) => __streamChunkHandler(c));
  return { done, pushes, events };
}

function runTokenizer(chunks) {
  let events = 0;
  const parser = xmlStreamParser(new Set(["response", "reasoning", "action_call", "output"]), () => true);
  parser.next();
  for (const c of chunks) {
    let r = parser.next(c);
    while (!r.done && r.value) {
      events++;
      r = parser.next();
    }
  }
  parser.return?.();
  return events;
}

const results = {};
for (const n of args.chunks.split(",").map(Number)) {
  const chunks = cut(text, n);
  // Correctness first: every unit's action call and output must come out whole.
  const check = await runHandleStream(chunks);
  assert(check.done.action_call === units && check.done.output === units,
    `chunk ${n}: ${check.done.action_call} action calls and ${check.done.output} outputs, expected ${units} each`);
  const times = [], tokTimes = [];
  for (let r = 0; r < args.warmup + args.reps; r++) {
    const t0 = performance.now();
    await runHandleStream(chunks);
    const t1 = performance.now();
    runTokenizer(chunks);
    const t2 = performance.now();
    if (r >= args.warmup) { times.push(t1 - t0); tokTimes.push(t2 - t1); }
  }
  times.sort((a, b) => a - b);
  tokTimes.sort((a, b) => a - b);
  const med = quantile(times, 0.5);
  results[n] = {
    chunks: chunks.length,
    ms: +med.toFixed(3),
    ms_p90: +quantile(times, 0.9).toFixed(3),
    mb_per_s: +((Buffer.byteLength(text) / 1e6) / (med / 1000)).toFixed(2),
    tokenizer_ms: +quantile(tokTimes, 0.5).toFixed(3),
    log_pushes: check.pushes,
  };
}

emit({ bench: "parser", chars: text.length, bytes: Buffer.byteLength(text), units, reps: args.reps, by_chunk: results });
