// Latency to the platform: from the arrival of the bytes that complete
// `</output>` to the call of the output handler, for N sequential full turns.
//
// Daydreams is not modified: createOpenAI takes a `fetch`, and ours wraps the
// response body so that each network chunk is timestamped (performance.now())
// the moment it arrives, before the AI SDK sees it; the SSE text is then
// followed cheaply to find the chunk in which the streamed content first
// contains `</output>`. The output handler timestamps its own call. The
// interval covers the AI SDK's SSE parsing, Daydreams' wrapStream, handleStream,
// its engine (schema validation of the output) and the call of the handler.
// Serve scripts/turn.json with --interval 1 so that events arrive one by one.
// Usage: node bench/daydreams/latency.mjs --base-url http://127.0.0.1:PORT/v1 --turns 100
import { parseArgs, makeAgent, sendTurn, counters, hooks, assert, emit, quantile } from "./common.mjs";

const args = parseArgs({ baseUrl: "", turns: 100, warmup: 10 });
assert(args.baseUrl, "--base-url is required");

const MARK = "</output>";
let arrivedAt = null; // time the current response's `</output>` arrived
let handledAt = null;

function timedFetch(url, init) {
  return fetch(url, init).then((res) => {
    if (!res.body || !String(res.headers.get("content-type")).includes("event-stream")) return res;
    const decoder = new TextDecoder();
    let pending = "", content = "";
    const body = res.body.pipeThrough(new TransformStream({
      transform(chunk, controller) {
        const now = performance.now();
        if (arrivedAt === null) {
          pending += decoder.decode(chunk, { stream: true });
          const lines = pending.split("\n");
          pending = lines.pop();
          for (const line of lines) {
            if (!line.startsWith("data: {")) continue;
            const delta = JSON.parse(line.slice(6)).choices?.[0]?.delta?.content;
            if (delta) content += delta;
          }
          if (content.includes(MARK)) arrivedAt = now;
        }
        controller.enqueue(chunk);
      },
    }));
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  });
}

hooks.onOutput = () => { handledAt = performance.now(); };
const agent = makeAgent({ baseURL: args.baseUrl, fetch: timedFetch });
await agent.start();

const samples = [];
for (let i = 0; i < args.warmup + args.turns; i++) {
  arrivedAt = null; handledAt = null;
  const o = counters.outputs;
  await sendTurn(agent, `lat-${i}`);
  assert(counters.outputs === o + 1, `turn ${i}: the output handler ran ${counters.outputs - o} times`);
  assert(arrivedAt !== null && handledAt !== null, `turn ${i}: no ${MARK} seen or handler not timed`);
  if (i >= args.warmup) samples.push(handledAt - arrivedAt);
}
samples.sort((a, b) => a - b);
emit({
  bench: "latency",
  turns: args.turns,
  p50_ms: +quantile(samples, 0.5).toFixed(3),
  p99_ms: +quantile(samples, 0.99).toFixed(3),
  max_ms: +samples.at(-1).toFixed(3),
  min_ms: +samples[0].toFixed(3),
});
process.exit(0);
