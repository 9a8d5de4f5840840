import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Instance } from '../../src/backends/contract.js';
import { startNereid, type TestServer } from '../helpers/server.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';

/**
 * The engine boundary's promises, end to end on a real server: a dead engine thread fails its in-flight
 * request and is replaced; a crash loop makes the version UNAVAILABLE with the reason and costs little CPU;
 * a client that goes away stops the engine's run; the model lifecycle serializes loads and unloads; a config
 * section nobody supports fails the load. The identity backend runs in engine threads here
 * (`--backend-config=identity,transport=thread`), so thread deaths are real.
 */

const io = `
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const params = (p: Record<string, number>): string =>
  Object.entries(p)
    .map(([k, v]) => `parameters { key: "${k}" value { string_value: "${v}" } }`)
    .join('\n');

const MODELS: Record<string, string> = {
  slow: `backend: "identity" max_batch_size: 0 ${io} instance_group [{ count: 1 kind: KIND_CPU }] ${params({ execute_delay_ms: 400 })}`,
  crashy: `backend: "identity" max_batch_size: 0 ${io} instance_group [{ count: 1 kind: KIND_CPU }] ${params({ execute_delay_ms: 300 })}`,
  looping: `backend: "identity" max_batch_size: 0 ${io} instance_group [{ count: 1 kind: KIND_CPU }]`,
  slow_load: `backend: "identity" max_batch_size: 0 ${io} ${params({ creation_delay_sec: 1 })}`,
  shared_load: `backend: "identity" max_batch_size: 0 ${io} ${params({ creation_delay_sec: 0.5 })}`,
  unsupported: `backend: "identity" max_batch_size: 1 ${io} model_transaction_policy { decoupled: true }`,
};

async function infer(
  url: string,
  model: string,
  opts: { signal?: AbortSignal; value?: number } = {},
): Promise<{ status: number; body: { error?: string; outputs?: { data: number[] }[] }; ms: number }> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    signal: opts.signal,
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1], datatype: 'INT32', data: [opts.value ?? 7] }] }),
  });
  return { status: res.status, body: (await res.json()) as { error?: string }, ms: performance.now() - t0 };
}

/** The live instances of a loaded model version (in-process server: fault injection reaches them directly). */
function instancesOf(s: TestServer, model: string): (Instance & { __crash?: () => void })[] {
  const m = s.server.models().find((x) => x.name === model);
  return m?.versions.get(1)?.pool?.instances ?? [];
}

const post = (url: string, path: string, body: unknown = {}) =>
  fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    body: (await r.json().catch(() => ({}))) as { error?: string },
  }));

async function index(url: string): Promise<{ name: string; state: string; reason: string }[]> {
  return (await post(url, '/v2/repository/index')).body as unknown as { name: string; state: string; reason: string }[];
}

/** Requests that failed / succeeded, and executions the engine ran to the end (a cancelled run is none). */
async function failures(url: string, model: string): Promise<{ fail: number; success: number; executions: number }> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  const st = (
    (await res.json()) as {
      model_stats: { inference_stats: Record<string, { count: number }>; execution_count: number }[];
    }
  ).model_stats[0];
  return {
    fail: st.inference_stats.fail.count,
    success: st.inference_stats.success.count,
    executions: st.execution_count,
  };
}

describe('Engine boundary (real server, identity engines in threads)', () => {
  let repo: string;
  let s: TestServer;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-boundary-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
    }
    s = await startNereid({
      repositories: [repo],
      modelControlMode: 'explicit',
      loadModels: ['slow', 'crashy', 'looping'],
      backendConfig: new Map([['identity', { transport: 'thread' }]]),
    });
  });
  after(async () => {
    await s.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('FAULT - a thread that dies mid-request fails it with INTERNAL naming the instance; the instance is restarted and the model is READY again', async () => {
    const inflight = infer(s.url, 'crashy');
    // Crash once the request runs on the instance (its pool has none idle), not after a fixed sleep that a loaded
    // machine overruns: crashed before the request arrived, it would be answered UNAVAILABLE from the queue.
    const pool = () =>
      s.server
        .models()
        .find((x) => x.name === 'crashy')
        ?.versions.get(1)?.pool;
    for (let i = 0; i < 2000 && pool()?.idle !== 0; i++) await sleep(5);
    const [instance] = instancesOf(s, 'crashy');
    instance.__crash?.();
    const r = await inflight;
    assert.equal(r.status, 500, JSON.stringify(r.body));
    assert.match(r.body.error ?? '', /instance crashy_0 \(engine thread\) died: exited with code 70/);
    // Restarted after the first backoff (100 ms), then serving again.
    let ready = false;
    for (let i = 0; i < 50 && !ready; i++) {
      await sleep(50);
      ready = (await fetch(`${s.url}/v2/models/crashy/ready`)).status === 200;
    }
    assert.ok(ready, 'crashy is READY again');
    const again = await infer(s.url, 'crashy', { value: 5 });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.deepEqual(again.body.outputs?.[0].data, [5]);
    assert.notEqual(instancesOf(s, 'crashy')[0], instance, 'a new instance');
  });

  it('FAULT - a crash loop leaves the version UNAVAILABLE with the reason, restarts back off, and it recovers', async () => {
    // Five crashes, each as soon as the restarted instance is there. The time from a crash to the next instance is
    // the restart's backoff (100, 200, 400, 800 ms) plus its start: lower bounds only, load can only lengthen them.
    // The fifth crash leaves the version down for its 1.6 s backoff, while the checks below run.
    const gaps: number[] = [];
    const giveUp = performance.now() + 30_000;
    let crashes = 0;
    let crashedAt = 0;
    while (crashes < 5 && performance.now() < giveUp) {
      for (const i of instancesOf(s, 'looping')) {
        if (crashes > 0) gaps.push(performance.now() - crashedAt);
        crashedAt = performance.now();
        i.__crash?.();
        crashes++;
        await i.died;
      }
      await sleep(5);
    }
    assert.equal(crashes, 5, `restarted ${crashes - 1} times in 30 s`);
    // Not one restart per event-loop turn: each waits at least its backoff, doubling.
    gaps.forEach((g, k) => {
      assert.ok(g >= 100 * 2 ** k - 10, `restart ${k + 1} came ${g.toFixed(0)} ms after its crash (gaps ${gaps})`);
    });
    const ready = await fetch(`${s.url}/v2/models/looping/ready`);
    assert.equal(ready.status, 400, 'not ready while no instance is healthy');
    const row = (await index(s.url)).find((m) => m.name === 'looping');
    assert.equal(row?.state, 'UNAVAILABLE');
    assert.match(row?.reason ?? '', /no healthy instance.*looping_0.*exited with code 70; restarting/);
    const refused = await infer(s.url, 'looping');
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.match(refused.body.error ?? '', /not available now: .*no healthy instance.*restarting/);
    assert.equal((await fetch(`${s.url}/v2/health/ready`)).status, 400, 'the server is not ready either');
    const metrics = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
    assert.match(metrics, /nereid_model_instances_healthy\{model="looping",version="1"\} 0/);
    // Left alone, the next restart (at most 3.2 s away) brings it back.
    let back = false;
    for (let i = 0; i < 80 && !back; i++) {
      await sleep(50);
      back = (await fetch(`${s.url}/v2/models/looping/ready`)).status === 200;
    }
    assert.ok(back, 'READY again once it stops crashing');
    const healed = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
    assert.match(healed, /nereid_model_instances_healthy\{model="looping",version="1"\} 1/);
  });

  it('CANCEL - a client disconnect during a slow run reaches the engine at once; the instance takes the next request', async () => {
    const before = await failures(s.url, 'slow');
    const ac = new AbortController();
    const first = infer(s.url, 'slow', { signal: ac.signal }).catch((e: Error) => e);
    await sleep(50);
    ac.abort();
    assert.ok((await first) instanceof Error);
    // One instance: the next request runs on it once the cancelled run let go of it.
    const second = await infer(s.url, 'slow');
    assert.equal(second.status, 200);
    const after = await failures(s.url, 'slow');
    // What the engine did, not how long it took (load stretches that): a run that went on to its end would be
    // recorded as an execution before the second one (one instance, in order); a stopped run is not.
    assert.equal(
      after.executions - before.executions,
      1,
      'the cancelled run stopped; only the next one ran to its end',
    );
    assert.equal(after.fail - before.fail, 1, 'the cancelled request counts as a failure');
    const metrics = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
    assert.match(metrics, /nv_inference_request_failure\{model="slow",version="1",reason="CANCELED"\} 1/);
  });

  it('CANCEL - a gRPC deadline during a slow run reaches the engine; the instance takes the next request', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const request = {
        model_name: 'slow',
        inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
      };
      const before = await failures(s.url, 'slow');
      await assert.rejects(
        callUnary(client, 'ModelInfer', request, { deadline: Date.now() + 60 }),
        (e: grpc.ServiceError) => {
          assert.equal(e.code, grpc.status.DEADLINE_EXCEEDED);
          return true;
        },
      );
      await callUnary(client, 'ModelInfer', request);
      // As above: had the deadline not stopped the run, it would be recorded as an execution too.
      const after = await failures(s.url, 'slow');
      assert.equal(after.executions - before.executions, 1, 'the run past its deadline stopped; only the next one ran');
    } finally {
      client.close();
    }
  });

  it('LIFECYCLE - an unload during a slow load wins: the load is cancelled and the model stays unloaded', async () => {
    const load = post(s.url, '/v2/repository/models/slow_load/load');
    // Unload once the load is under way (an event, not a fixed sleep that a loaded machine can overrun: then the
    // unload would come first and the load after it would rightly win).
    for (let i = 0; i < 1000; i++) {
      if ((await index(s.url)).find((m) => m.name === 'slow_load')?.state === 'LOADING') break;
      await sleep(5);
    }
    const unload = await post(s.url, '/v2/repository/models/slow_load/unload');
    assert.equal(unload.status, 200, JSON.stringify(unload.body));
    const loaded = await load;
    assert.equal(loaded.status, 400, JSON.stringify(loaded.body));
    assert.match(loaded.body.error ?? '', /cancelled by an unload/);
    await sleep(1200); // past the instance's creation delay
    const row = (await index(s.url)).find((m) => m.name === 'slow_load');
    assert.equal(row?.state, 'UNAVAILABLE');
    assert.equal((await fetch(`${s.url}/v2/models/slow_load/ready`)).status, 400);
  });

  it('LIFECYCLE - ten concurrent loads of one model share one load', async () => {
    const t0 = performance.now();
    const all = await Promise.all(
      Array.from({ length: 10 }, () =>
        post(s.url, '/v2/repository/models/shared_load/load').then((r) => ({ ...r, at: performance.now() })),
      ),
    );
    assert.deepEqual(
      all.map((r) => r.status),
      Array(10).fill(200),
    );
    // Each load creates its instance in 0.5 s. Shared, the ten answer together once the one load is done; one after
    // another, the last would answer nine loads after the first. A ratio within this run: load stretches both.
    const first = Math.min(...all.map((r) => r.at)) - t0;
    const spread = Math.max(...all.map((r) => r.at)) - t0 - first;
    assert.ok(spread < first, `the ten answered over ${spread.toFixed(0)} ms, one load took ${first.toFixed(0)} ms`);
    assert.equal((await infer(s.url, 'shared_load')).status, 200);
  });

  it('BAD CONFIG - a section no backend supports yet fails the load as UNSUPPORTED, naming it', async () => {
    const r = await post(s.url, '/v2/repository/models/unsupported/load');
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.match(r.body.error ?? '', /config section 'decoupled' is not supported/);
    // A model the repository has but could not load: UNAVAILABLE with the reason, not "not found" (issue 26 item 7).
    const after = await infer(s.url, 'unsupported');
    assert.equal(after.status, 503);
    assert.match(after.body.error ?? '', /failed to load: .*config section 'decoupled' is not supported/);
  });
});
