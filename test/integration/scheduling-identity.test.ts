import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * Scheduling against the real server over HTTP: Triton's identity backend with controllable latency,
 * plus a copy of the example `simple` model (onnxruntime) for real batching.
 */

const io = (dims: string) => `
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: ${dims} }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: ${dims} }]`;
const delay = (ms: number) => `parameters { key: "execute_delay_ms" value { string_value: "${ms}" } }`;

const MODELS: Record<string, string> = {
  // Two instances, no batching: two slow requests overlap.
  parallel: `backend: "identity" max_batch_size: 0 ${io('[ 4 ]')}
    instance_group [{ count: 2 kind: KIND_CPU }] ${delay(400)}`,
  // Batches whatever arrives within 100 ms; variable second dim for the shape test.
  batched: `backend: "identity" max_batch_size: 8 ${io('[ -1 ]')}
    dynamic_batching { max_queue_delay_microseconds: 100000 } ${delay(20)}`,
  // One slow instance, a queue of one, two priority levels.
  small_queue: `backend: "identity" max_batch_size: 1 ${io('[ 1 ]')}
    dynamic_batching { priority_levels: 2 default_priority_level: 2 default_queue_policy { max_queue_size: 1 } } ${delay(400)}`,
  // Queued requests give up after 200 ms (a request may shorten that).
  reject: `backend: "identity" max_batch_size: 1 ${io('[ 1 ]')}
    dynamic_batching { default_queue_policy { default_timeout_microseconds: 200000 allow_timeout_override: true } }
    ${delay(1000)}`,
  // Same timeout, but DELAY: the request is kept and runs later.
  delayed: `backend: "identity" max_batch_size: 1 ${io('[ 1 ]')}
    dynamic_batching { default_queue_policy { default_timeout_microseconds: 50000 timeout_action: DELAY } }
    ${delay(300)}`,
  // One slow instance for the disconnect test.
  slow: `backend: "identity" max_batch_size: 1 ${io('[ 1 ]')} dynamic_batching { } ${delay(400)}`,
};

interface Reply {
  status: number;
  body: { error?: string; outputs?: { name: string; shape: number[]; data: number[] }[] };
  ms: number;
}

async function infer(
  url: string,
  model: string,
  shape: number[],
  opts: { parameters?: Record<string, number>; signal?: AbortSignal; value?: number } = {},
): Promise<Reply> {
  const n = shape.reduce((a, b) => a * b, 1);
  const t0 = performance.now();
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    signal: opts.signal,
    body: JSON.stringify({
      inputs: [{ name: 'INPUT0', shape, datatype: 'INT32', data: Array.from({ length: n }, () => opts.value ?? 7) }],
      ...(opts.parameters ? { parameters: opts.parameters } : {}),
    }),
  });
  const body = (await res.json()) as Reply['body'];
  return { status: res.status, body, ms: performance.now() - t0 };
}

interface Stats {
  execution_count: number;
  inference_count: number;
  inference_stats: Record<'success' | 'fail' | 'queue' | 'compute_infer', { count: number; ns: number }>;
  batch_stats: { batch_size: number; compute_infer: { count: number } }[];
}

async function stats(url: string, model: string): Promise<Stats> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  return ((await res.json()) as { model_stats: Stats[] }).model_stats[0];
}

const batchCounts = (s: Stats): Record<number, number> =>
  Object.fromEntries(s.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]));

describe('Scheduling (real server, identity models and simple)', () => {
  let repo: string;
  let s: TestServer;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-sched-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
    }
    // `simple` with a 20 ms queue delay, so concurrent requests merge whatever the machine's timing.
    await mkdir(join(repo, 'simple_batched', '1'), { recursive: true });
    await copyFile(join(EXAMPLES, 'simple/1/model.onnx'), join(repo, 'simple_batched/1/model.onnx'));
    const simple = await readFile(join(EXAMPLES, 'simple/config.pbtxt'), 'utf8');
    await writeFile(
      join(repo, 'simple_batched/config.pbtxt'),
      simple.replace('name: "simple"', 'name: "simple_batched"') +
        '\ndynamic_batching { max_queue_delay_microseconds: 20000 }\n',
    );
    s = await startNereid({ repositories: [repo] });
  });
  after(async () => {
    await s.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('identity echoes its input', async () => {
    const r = await infer(s.url, 'parallel', [4], { value: 3 });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.outputs?.[0], { name: 'OUTPUT0', datatype: 'INT32', shape: [4], data: [3, 3, 3, 3] });
  });

  it('two instances run two slow requests at once: neither waits for the other', async () => {
    const before = await stats(s.url, 'parallel');
    const rs = await Promise.all([infer(s.url, 'parallel', [4]), infer(s.url, 'parallel', [4])]);
    assert.deepEqual(
      rs.map((r) => r.status),
      [200, 200],
    );
    // What the server measured, as a ratio of one run (load stretches both): run one after the other, the second
    // would queue for the first's whole execution (half the two runs' compute time); side by side, neither queues.
    const after = await stats(s.url, 'parallel');
    const queued = after.inference_stats.queue.ns - before.inference_stats.queue.ns;
    const computed = after.inference_stats.compute_infer.ns - before.inference_stats.compute_infer.ns;
    assert.ok(queued < computed / 4, `queued ${queued / 1e6} ms in all while computing ${computed / 1e6} ms`);
  });

  it('batches concurrent requests into one execution; a request of batch size n counts n', async () => {
    const before = await stats(s.url, 'batched');
    const rs = await Promise.all([
      infer(s.url, 'batched', [1, 3], { value: 1 }),
      infer(s.url, 'batched', [2, 3], { value: 2 }),
      infer(s.url, 'batched', [1, 3], { value: 3 }),
    ]);
    assert.deepEqual(
      rs.map((r) => r.body.outputs?.[0].data),
      [
        [1, 1, 1],
        [2, 2, 2, 2, 2, 2],
        [3, 3, 3],
      ],
    );
    const after = await stats(s.url, 'batched');
    assert.equal(after.execution_count - before.execution_count, 1);
    assert.equal(after.inference_count - before.inference_count, 4);
    assert.equal(batchCounts(after)[4], 1);
  });

  it('BAD CALL - requests with different non-batch shapes are answered but not merged', async () => {
    const before = await stats(s.url, 'batched');
    const rs = await Promise.all([infer(s.url, 'batched', [1, 3]), infer(s.url, 'batched', [1, 5])]);
    assert.deepEqual(
      rs.map((r) => [r.status, r.body.outputs?.[0].shape]),
      [
        [200, [1, 3]],
        [200, [1, 5]],
      ],
    );
    const after = await stats(s.url, 'batched');
    assert.equal(after.execution_count - before.execution_count, 2);
  });

  it('BAD CALL - a batch size above max_batch_size is refused before queueing', async () => {
    const r = await infer(s.url, 'batched', [9, 3]);
    assert.equal(r.status, 400);
    assert.match(r.body.error ?? '', /batch-size must be <= 8/);
  });

  it('BAD CALL - a full queue answers 503 "Exceeds maximum queue size"', async () => {
    const running = infer(s.url, 'small_queue', [1, 1]);
    await sleep(50);
    const queued = infer(s.url, 'small_queue', [1, 1]);
    await sleep(50);
    const over = await infer(s.url, 'small_queue', [1, 1]);
    assert.equal(over.status, 503);
    assert.match(over.body.error ?? '', /Exceeds maximum queue size/);
    assert.deepEqual(
      (await Promise.all([running, queued])).map((r) => r.status),
      [200, 200],
    );
  });

  it('BAD CALL - a priority above priority_levels is 400; priority 1 is served first', async () => {
    const bad = await infer(s.url, 'small_queue', [1, 1], { parameters: { priority: 3 } });
    assert.equal(bad.status, 400);
    assert.match(bad.body.error ?? '', /priority 3 is out of range/);
    const ok = await infer(s.url, 'small_queue', [1, 1], { parameters: { priority: 1 } });
    assert.equal(ok.status, 200);
  });

  it('BAD CALL - a queued request times out with 503 "Request timeout expired" while the instance is busy', async () => {
    // The order the answers come in, not their times (load stretches those): the 1 s run ends last.
    const order: string[] = [];
    const track = (name: string, p: Promise<Reply>) => p.then((r) => (order.push(name), r));
    const running = track('running', infer(s.url, 'reject', [1, 1]));
    await sleep(50);
    const t0 = performance.now();
    const late = track('late', infer(s.url, 'reject', [1, 1]));
    await sleep(50);
    // The request's own timeout may shorten the policy's (to 20 ms here): asked for 50 ms after `late`, it is
    // answered first; with the policy's 200 ms it would be answered 50 ms after `late`.
    const short = await track('short', infer(s.url, 'reject', [1, 1], { parameters: { timeout: 20000 } }));
    assert.equal(short.status, 503);
    assert.match(short.body.error ?? '', /Request timeout expired/);
    const lateReply = await late;
    const waited = performance.now() - t0;
    assert.equal(lateReply.status, 503);
    assert.match(lateReply.body.error ?? '', /Request timeout expired/);
    assert.ok(waited >= 190, `answered after ${waited.toFixed(0)} ms (timeout 200 ms)`);
    assert.equal((await running).status, 200);
    assert.deepEqual(order, ['short', 'late', 'running'], 'timed out in the queue, not after the running request');
  });

  it('BAD CALL - DELAY timeout keeps the request: it runs after the others', async () => {
    const running = infer(s.url, 'delayed', [1, 1]);
    await sleep(20);
    const late = infer(s.url, 'delayed', [1, 1]);
    const rs = await Promise.all([running, late]);
    assert.deepEqual(
      rs.map((r) => r.status),
      [200, 200],
    );
  });

  it('BAD CALL - a client that disconnects while queued leaves the queue; its request never runs', async () => {
    const before = await stats(s.url, 'slow');
    const running = infer(s.url, 'slow', [1, 1]);
    await sleep(50);
    const ac = new AbortController();
    const gone = infer(s.url, 'slow', [1, 1], { signal: ac.signal }).catch((e: Error) => e.name);
    await sleep(50);
    ac.abort();
    assert.equal(await gone, 'AbortError');
    const next = await infer(s.url, 'slow', [1, 1]);
    assert.equal(next.status, 200);
    assert.equal((await running).status, 200);
    // Two executions, `running` and `next`: the abandoned request never ran (it would be a third).
    const after = await stats(s.url, 'slow');
    assert.equal(after.execution_count - before.execution_count, 2, 'the abandoned request did not run');
    assert.equal(after.inference_stats.fail.count - before.inference_stats.fail.count, 1);
  });

  it('simple (onnxruntime, 20 ms queue delay) batches concurrent requests and answers each with its own rows', async () => {
    const call = async (v: number) => {
      const data = Array.from({ length: 16 }, () => v);
      const res = await fetch(`${s.url}/v2/models/simple_batched/infer`, {
        method: 'POST',
        body: JSON.stringify({
          inputs: [
            { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data },
            { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data },
          ],
        }),
      });
      const body = (await res.json()) as Reply['body'];
      return body.outputs?.find((o) => o.name === 'OUTPUT0')?.data[0];
    };
    const values = Array.from({ length: 32 }, (_, i) => i);
    assert.deepEqual(
      await Promise.all(values.map(call)),
      values.map((v) => 2 * v),
    );
    const st = await stats(s.url, 'simple_batched');
    assert.ok(st.execution_count < 32, `32 requests ran in ${st.execution_count} executions`);
  });
});
