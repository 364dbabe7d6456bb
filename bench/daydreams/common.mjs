// Shared set-up of the Daydreams side of the benchmarks: one agent, the way a
// Daydreams user would write it, pointed at bench/fake_openai.py.

// Node 20 has no Promise.try; Daydreams 0.3.22 calls it for output handlers,
// action callbacks and context actions. Node 22.10+ has it natively.
if (typeof Promise.try !== "function") {
  Promise.try = function (fn, ...args) {
    return new Promise((resolve) => resolve(fn(...args)));
  };
}

import { createDreams, context, action, output, input, LogLevel } from "@daydreamsai/core";
import { createOpenAI } from "@ai-sdk/openai";
import * as z from "zod";

export function parseArgs(defaults) {
  const out = { ...defaults };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) throw new Error(`unexpected argument ${a}`);
    const key = a.slice(2).replace(/-(\w)/g, (_, c) => c.toUpperCase());
    if (!(key in defaults)) throw new Error(`unknown option ${a}`);
    const v = argv[++i];
    if (v === undefined) throw new Error(`${a} needs a value`);
    out[key] = typeof defaults[key] === "number" ? Number(v) : v;
  }
  return out;
}

// Counters that prove each turn really ran: Daydreams logs provider errors and
// parse errors and carries on, so a broken set-up would otherwise look fast.
export const counters = { actions: 0, outputs: 0, outputChars: 0, errors: 0 };

// Hooks a script may set: called synchronously inside the handlers.
export const hooks = { onOutput: null, onAction: null };

export const chat = context({
  type: "chat",
  schema: z.object({ id: z.string() }),
  key: ({ id }) => id,
  maxSteps: 5,
  create: () => ({ turns: 0 }),
  onError: (err) => {
    counters.errors++;
    if (process.env.BENCH_DEBUG) console.error("context error:", err);
  },
});

export const getWeather = action({
  name: "get-weather",
  description: "Current weather for a location.",
  schema: z.object({ location: z.string() }),
  handler: async ({ location }) => {
    counters.actions++;
    hooks.onAction?.(location);
    return { temperature: 72 };
  },
});

export const textOutput = output({
  description: "Reply to the user.",
  schema: z.object({ content: z.string() }),
  handler: (data, ctx) => {
    counters.outputs++;
    counters.outputChars += data.content.length;
    hooks.onOutput?.(data, ctx);
    return { processed: true };
  },
});

export function makeAgent({ baseURL, fetch: fetchImpl, model = "daydreams", tasks } = {}) {
  const openai = createOpenAI({ baseURL, apiKey: "x", ...(fetchImpl ? { fetch: fetchImpl } : {}) });
  return createDreams({
    // .chat(): the chat-completions API. Plain openai(model) calls the Responses
    // API, which the fake answers 404, and Daydreams swallows that error.
    model: openai.chat(model),
    logLevel: LogLevel.ERROR,
    contexts: [chat],
    actions: [getWeather],
    inputs: { text: input({ schema: z.string() }) },
    outputs: { text: textOutput },
    ...(tasks ? { tasks } : {}),
  });
}

export function sendTurn(agent, id, text = "What is the weather in New York City?") {
  return agent.send({ context: chat, args: { id }, input: { type: "text", data: text } });
}

// Peak RSS by sampling every `ms` milliseconds (plus a final sample).
export function rssSampler(ms = 10) {
  let peak = process.memoryUsage().rss;
  const timer = setInterval(() => {
    const r = process.memoryUsage().rss;
    if (r > peak) peak = r;
  }, ms);
  return {
    stop() {
      clearInterval(timer);
      const r = process.memoryUsage().rss;
      if (r > peak) peak = r;
      return peak;
    },
  };
}

export function assert(cond, msg) {
  if (!cond) {
    console.error(`ASSERTION FAILED: ${msg}`);
    console.log(JSON.stringify({ ok: false, error: msg }));
    process.exit(2);
  }
}

export function emit(obj) {
  console.log(JSON.stringify({ ok: true, node: process.version, ...obj }));
}

export function quantile(sorted, q) {
  if (sorted.length === 0) return null;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos), hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

export async function getJSON(url, init) {
  const r = await fetch(url, init);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}
