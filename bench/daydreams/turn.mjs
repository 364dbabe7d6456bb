// Full turns per second: input -> prompt -> stream from the fake -> parse ->
// get-weather action -> second step -> text output handler -> state saved (the
// default in-memory store). Sequential turns, measured two ways:
//   one:      every turn in the same conversation (history accumulates)
//   distinct: every turn in a new conversation
// Usage: node bench/daydreams/turn.mjs --base-url http://127.0.0.1:PORT/v1 --turns 200
import { parseArgs, makeAgent, sendTurn, counters, assert, emit, getJSON } from "./common.mjs";

const args = parseArgs({ baseUrl: "", turns: 200, warmup: 20 });
assert(args.baseUrl, "--base-url is required");
const root = args.baseUrl.replace(/\/v1\/?$/, "");

const agent = makeAgent({ baseURL: args.baseUrl });
await agent.start();

async function phase(label, n, idFor) {
  const before = { ...counters };
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const a = counters.actions, o = counters.outputs;
    await sendTurn(agent, idFor(i));
    assert(counters.actions === a + 1, `${label} turn ${i}: get-weather ran ${counters.actions - a} times, not once`);
    assert(counters.outputs === o + 1, `${label} turn ${i}: the output handler ran ${counters.outputs - o} times, not once`);
  }
  const ms = performance.now() - t0;
  assert(counters.errors === before.errors, `${label}: ${counters.errors - before.errors} context errors`);
  return { turns: n, ms: +ms.toFixed(1), turns_per_s: +((n * 1000) / ms).toFixed(2) };
}

await phase("warmup", args.warmup, (i) => `warm-${i}`);
await fetch(`${root}/stats/reset`, { method: "POST" });
const one = await phase("one", args.turns, () => "one");
const oneStats = await getJSON(`${root}/stats`);
await fetch(`${root}/stats/reset`, { method: "POST" });
const distinct = await phase("distinct", args.turns, (i) => `c-${i}`);
const distinctStats = await getJSON(`${root}/stats`);

// Each turn must have been exactly two model requests: step 1 (response 0,
// the action call) then step 2 (response 1, the output).
for (const [label, st] of [["one", oneStats], ["distinct", distinctStats]]) {
  const picks = st.requests.map((r) => r.response).join("");
  assert(picks === "01".repeat(args.turns), `${label}: the fake saw responses ${picks.slice(0, 40)}..., expected 0101...`);
}

emit({
  bench: "turn",
  turns_per_s: distinct.turns_per_s,
  turns_per_s_one_conversation: one.turns_per_s,
  distinct,
  one,
  requests_per_turn: 2,
});
process.exit(0);
