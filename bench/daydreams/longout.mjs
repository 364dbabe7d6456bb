// A long output: one response carrying about 200 KB of output content, streamed by
// the fake in 8-character chunks (serve scripts/longout.json with --chunk 8).
// Reports the turn's wall time and the process's peak RSS.
// Usage: node bench/daydreams/longout.mjs --base-url http://127.0.0.1:PORT/v1
import { parseArgs, makeAgent, sendTurn, counters, assert, emit, getJSON, rssSampler } from "./common.mjs";

const args = parseArgs({ baseUrl: "", reps: 1 });
assert(args.baseUrl, "--base-url is required");
const root = args.baseUrl.replace(/\/v1\/?$/, "");

const agent = makeAgent({ baseURL: args.baseUrl });
await agent.start();
globalThis.gc?.();
const rssBefore = process.memoryUsage().rss;
await fetch(`${root}/stats/reset`, { method: "POST" });

const sampler = rssSampler(10);
const times = [];
for (let i = 0; i < args.reps; i++) {
  const o = counters.outputs, chars = counters.outputChars;
  const t0 = performance.now();
  await sendTurn(agent, `long-${i}`, "Write me a very long text.");
  times.push(performance.now() - t0);
  assert(counters.outputs === o + 1, `the output handler ran ${counters.outputs - o} times, not once`);
  assert(counters.outputChars - chars > 150_000, `the output was only ${counters.outputChars - chars} characters`);
}
const peak = sampler.stop();
const stats = await getJSON(`${root}/stats`);
assert(stats.count === args.reps, `the fake saw ${stats.count} requests, expected ${args.reps}`);
assert(counters.errors === 0, `${counters.errors} context errors`);

times.sort((a, b) => a - b);
emit({
  bench: "longout",
  ms: +times[Math.floor(times.length / 2)].toFixed(1),
  output_chars: counters.outputChars / args.reps,
  peak_rss_mb: +(peak / 2 ** 20).toFixed(1),
  rss_before_mb: +(rssBefore / 2 ** 20).toFixed(1),
  peak_rss_delta_mb: +((peak - rssBefore) / 2 ** 20).toFixed(1),
});
process.exit(0);
