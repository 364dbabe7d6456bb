// Many conversations at once: N full turns (action, then output), each in its own
// conversation, all sent at the same moment against a fake with --latency 1 (the
// 1 s model). Wall time until the last turn ends, and the process's peak RSS
// (sampled every 10 ms). Daydreams' task-queue settings are left at its defaults.
// Usage: node bench/daydreams/many.mjs --base-url http://127.0.0.1:PORT/v1 --n 1000
import { parseArgs, makeAgent, sendTurn, counters, assert, emit, getJSON, rssSampler } from "./common.mjs";

const args = parseArgs({ baseUrl: "", n: 1000 });
assert(args.baseUrl, "--base-url is required");
const root = args.baseUrl.replace(/\/v1\/?$/, "");

const agent = makeAgent({ baseURL: args.baseUrl });
await agent.start();
const rssBefore = process.memoryUsage().rss;
await fetch(`${root}/stats/reset`, { method: "POST" });

const sampler = rssSampler(10);
const t0 = performance.now();
const ends = [];
await Promise.all(
  Array.from({ length: args.n }, (_, i) =>
    sendTurn(agent, `many-${i}`).then(() => ends.push(performance.now() - t0))),
);
const wall = performance.now() - t0;
const peak = sampler.stop();

assert(counters.actions === args.n, `get-weather ran ${counters.actions} times, expected ${args.n}`);
assert(counters.outputs === args.n, `the output handler ran ${counters.outputs} times, expected ${args.n}`);
assert(counters.errors === 0, `${counters.errors} context errors`);
const stats = await getJSON(`${root}/stats`);
assert(stats.count === 2 * args.n, `the fake saw ${stats.count} requests, expected ${2 * args.n}`);

ends.sort((a, b) => a - b);
emit({
  bench: "many",
  n: args.n,
  wall_s: +(wall / 1000).toFixed(2),
  first_done_s: +(ends[0] / 1000).toFixed(2),
  median_done_s: +(ends[Math.floor(ends.length / 2)] / 1000).toFixed(2),
  peak_rss_mb: +(peak / 2 ** 20).toFixed(1),
  rss_before_mb: +(rssBefore / 2 ** 20).toFixed(1),
  requests: stats.count,
});
process.exit(0);
