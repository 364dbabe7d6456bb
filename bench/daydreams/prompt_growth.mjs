// Prompt size over many turns of one conversation: the fake records the
// characters of every prompt it receives (GET /stats); this drives N full turns
// in one conversation and reports, per turn, the size of the step-1 prompt (the
// one that carries the new input) and of the step-2 prompt (after the action).
// Approximate tokens = characters / 4.
// Usage: node bench/daydreams/prompt_growth.mjs --base-url http://127.0.0.1:PORT/v1 --turns 100
import { parseArgs, makeAgent, sendTurn, counters, assert, emit, getJSON } from "./common.mjs";

const args = parseArgs({ baseUrl: "", turns: 100 });
assert(args.baseUrl, "--base-url is required");
const root = args.baseUrl.replace(/\/v1\/?$/, "");

const agent = makeAgent({ baseURL: args.baseUrl });
await agent.start();
await fetch(`${root}/stats/reset`, { method: "POST" });
for (let i = 0; i < args.turns; i++) {
  await sendTurn(agent, "growth", `Turn ${i + 1}: what is the weather in New York City?`);
}
assert(counters.actions === args.turns && counters.outputs === args.turns,
  `${counters.actions} actions and ${counters.outputs} outputs for ${args.turns} turns`);
const stats = await getJSON(`${root}/stats`);
assert(stats.count === 2 * args.turns, `the fake saw ${stats.count} requests, expected ${2 * args.turns}`);

const step1 = stats.requests.filter((_, i) => i % 2 === 0).map((r) => r.prompt_chars);
const step2 = stats.requests.filter((_, i) => i % 2 === 1).map((r) => r.prompt_chars);
const at = (arr, turn) => arr[Math.min(turn, arr.length) - 1];
const marks = [1, 2, 5, 10, 20, 50, 100].filter((t) => t <= args.turns);
const last = args.turns;
// Growth per turn over the second half (after any warm-up effects).
const half = Math.floor(last / 2);
const slope = half > 0 ? (at(step1, last) - at(step1, half)) / (last - half) : 0;

emit({
  bench: "prompt_growth",
  turns: args.turns,
  first_chars: at(step1, 1),
  last_chars: at(step1, last),
  first_tokens: Math.round(at(step1, 1) / 4),
  last_tokens: Math.round(at(step1, last) / 4),
  growth_chars_per_turn: +slope.toFixed(1),
  bounded: slope === 0,
  by_turn: Object.fromEntries(marks.map((t) => [t, { step1_chars: at(step1, t), step2_chars: at(step2, t) }])),
  step1_chars: step1,
});
process.exit(0);
