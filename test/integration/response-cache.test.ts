import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { addSubModel, ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * The response cache on real servers: hits answered without running the model and byte-identical to the
 * computed answer (HTTP binary and gRPC raw), keys that tell requests apart, LRU eviction, a cache smaller than
 * one response, statistics and nv_cache_* metrics, and the configs and flags it refuses.
 */

const identity = (name: string, extra = '') => `name: "${name}" backend: "identity" max_batch_size: 4
  input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }] output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }]
  instance_group [{ count: 1 kind: KIND_CPU }] parameters { key: "execute_delay_ms" value { string_value: "100" } } ${extra}`;
const CACHED = 'response_cache { enable: true }';
const i32 = (n: string) => `{ name: "${n}" data_type: TYPE_INT32 dims: [ 16 ] }`;

async function repoOf(models: Record<string, string>): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-cache-'));
  for (const [name, config] of Object.entries(models)) {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), config);
    if (config.includes('onnxruntime')) await writeModel(join(repo, name, '1', 'model.onnx'), addSubModel(ELEM.INT32));
  }
  return repo;
}

interface Stats {
  inference_count: number;
  execution_count: number;
  inference_stats: Record<'success' | 'cache_hit' | 'cache_miss', { count: number; ns: number }>;
}
const stats = async (url: string, model: string): Promise<Stats> =>
  ((await (await fetch(`${url}/v2/models/${model}/stats`)).json()) as { model_stats: Stats[] }).model_stats[0];

async function infer(url: string, model: string, values: number[], extra: Record<string, unknown> = {}) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [{ name: 'INPUT0', shape: [1, values.length], datatype: 'FP32', data: values }],
      ...extra,
    }),
  });
  const body = (await res.json()) as { error?: string; outputs?: { data: number[] }[] };
  return { status: res.status, body, ms: performance.now() - t0 };
}

describe('response cache', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    repo = await repoOf({
      cached: identity('cached', CACHED),
      uncached: identity('uncached'),
      add_sub: `backend: "onnxruntime" max_batch_size: 8 input [ ${i32('INPUT0')}, ${i32('INPUT1')} ]
        output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ] ${CACHED}`,
    });
    s = await startNereid({ repositories: [repo], responseCacheBytes: 1 << 20 });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('answers a repeated request from the cache without running the model, and counts it as Triton does', async () => {
    const first = await infer(s.url, 'cached', [1, 2, 3]);
    const second = await infer(s.url, 'cached', [1, 2, 3]);
    assert.deepEqual(second.body.outputs?.[0].data, [1, 2, 3]);
    assert.ok(first.ms >= 90, `the first request ran the model (${first.ms.toFixed(0)} ms)`);
    // The hit's own wall time is not asserted (a loaded machine can make it slow too): the counts show it did
    // not run the model.
    const st = await stats(s.url, 'cached');
    assert.deepEqual(
      [st.execution_count, st.inference_count, st.inference_stats.success.count],
      [1, 1, 2],
      'a hit is a success, but neither an inference nor an execution',
    );
    assert.deepEqual([st.inference_stats.cache_hit.count, st.inference_stats.cache_miss.count], [1, 1]);
    assert.ok(st.inference_stats.cache_hit.ns > 0 && st.inference_stats.cache_miss.ns > 0);
    // A model without response_cache never uses it.
    await infer(s.url, 'uncached', [1, 2, 3]);
    await infer(s.url, 'uncached', [1, 2, 3]);
    const un = await stats(s.url, 'uncached');
    assert.deepEqual(
      [un.execution_count, un.inference_stats.cache_hit.count, un.inference_stats.cache_miss.count],
      [2, 0, 0],
    );
  });

  it('keys on the input data, the requested outputs and the parameters', async () => {
    const before = (await stats(s.url, 'cached')).execution_count;
    await infer(s.url, 'cached', [7, 7]);
    await infer(s.url, 'cached', [7, 8]);
    await infer(s.url, 'cached', [7, 7], { parameters: { tag: 'a' } });
    await infer(s.url, 'cached', [7, 7], { parameters: { tag: 'a' } });
    await infer(s.url, 'cached', [7, 7], { outputs: [{ name: 'OUTPUT0' }] });
    const after = await stats(s.url, 'cached');
    // [7,7]; [7,8]; tag a (then a hit); naming the one output it would get anyway: a hit.
    assert.equal(after.execution_count - before, 3);
    // add_sub: asking for OUTPUT1 alone is another answer than both outputs.
    const body = (outputs?: { name: string }[]) =>
      JSON.stringify({
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({
          name,
          shape: [1, 16],
          datatype: 'INT32',
          data: Array(16).fill(9),
        })),
        outputs,
      });
    const runs = async () => (await stats(s.url, 'add_sub')).execution_count;
    const n0 = await runs();
    for (const outputs of [undefined, [{ name: 'OUTPUT1' }], undefined]) {
      const r = await fetch(`${s.url}/v2/models/add_sub/infer`, { method: 'POST', body: body(outputs) });
      assert.equal(r.status, 200);
    }
    assert.equal((await runs()) - n0, 2);
  });

  it('answers byte-identical responses from the cache over HTTP (binary) and gRPC (raw)', async () => {
    const body = JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i * 3) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => 100 - i) },
      ],
      parameters: { binary_data_output: true },
    });
    const raw = async () => {
      const r = await fetch(`${s.url}/v2/models/add_sub/infer`, { method: 'POST', body });
      return Buffer.from(await r.arrayBuffer());
    };
    const computed = await raw();
    const cached = await raw();
    assert.ok(computed.equals(cached), 'HTTP bodies differ');
    const request = {
      model_name: 'add_sub',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
      ],
      raw_input_contents: [int32Bytes(Array.from({ length: 16 }, (_, i) => i)), int32Bytes(Array(16).fill(5))],
    };
    type Reply = { outputs: unknown[]; raw_output_contents: Buffer[] };
    const g1 = await callUnary<Reply>(client, 'ModelInfer', request);
    const g2 = await callUnary<Reply>(client, 'ModelInfer', request);
    assert.deepEqual(g2.outputs, g1.outputs);
    assert.ok(g1.raw_output_contents.every((b, i) => Buffer.from(b).equals(Buffer.from(g2.raw_output_contents[i]))));
    const st = await stats(s.url, 'add_sub');
    assert.deepEqual(
      [st.inference_stats.cache_hit.count, st.inference_stats.cache_miss.count, st.execution_count],
      [3, 4, 4],
      'with the keys test: one hit and two misses before these two pairs',
    );
  });

  it('exports nv_cache_* per model, only for models whose responses are cached', async () => {
    const text = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
    assert.match(text, /^nv_cache_num_hits_per_model\{model="cached",version="1"\} [1-9]\d*$/m);
    assert.match(text, /^nv_cache_num_misses_per_model\{model="cached",version="1"\} [1-9]\d*$/m);
    assert.match(text, /^nv_cache_hit_duration_per_model\{model="cached",version="1"\} \d+$/m);
    assert.match(text, /^nv_cache_miss_duration_per_model\{model="cached",version="1"\} \d+$/m);
    assert.doesNotMatch(text, /nv_cache_num_hits_per_model\{model="uncached"/);
  });
});

describe('response cache: capacity', () => {
  it('evicts the least recently used response, and never caches one larger than the whole cache', async () => {
    const repo = await repoOf({ lru: identity('lru', CACHED), huge: identity('huge', CACHED) });
    // One 256-element FP32 answer takes a little over 1200 bytes: two fit in 3000.
    const s = await startNereid({ repositories: [repo], responseCacheBytes: 3000 });
    try {
      const v = (x: number) => Array(256).fill(x);
      const ran: boolean[] = [];
      for (const x of [1, 2, 1, 3, 2, 3, 1]) {
        const before = (await stats(s.url, 'lru')).execution_count;
        const r = await infer(s.url, 'lru', v(x));
        assert.equal(r.status, 200);
        assert.equal(r.body.outputs?.[0].data[0], x);
        ran.push((await stats(s.url, 'lru')).execution_count > before);
      }
      // [1] [1,2] hit 1 → [2,1] 3 evicts 2 → [1,3] 2 evicts 1 → [3,2] hit 3 → [2,3] 1 evicts 2.
      assert.deepEqual(ran, [true, true, false, true, true, false, true]);

      const big = Array(2000).fill(0.5);
      const a = await infer(s.url, 'huge', big);
      const b = await infer(s.url, 'huge', big);
      assert.deepEqual([a.status, b.status, b.body.outputs?.[0].data.length], [200, 200, 2000]);
      const st = await stats(s.url, 'huge');
      assert.deepEqual(
        [st.execution_count, st.inference_stats.cache_hit.count, st.inference_stats.cache_miss.count],
        [2, 0, 2],
      );
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });

  it("BAD CONFIG - response_cache on a sequence model fails the load (Triton's rule)", async () => {
    const repo = await repoOf({
      seq_cached: identity('seq_cached', `${CACHED} sequence_batching { }`),
    });
    await assert.rejects(
      startNereid({ repositories: [repo], responseCacheBytes: 1 << 20 }),
      /Response Cache does not currently support model seq_cached with sequence batching scheduler/,
    );
    await rm(repo, { recursive: true, force: true });
  });

  it('a model that enables response_cache on a server without a cache computes every request', async () => {
    const repo = await repoOf({ wants: identity('wants', CACHED) });
    const s = await startNereid({ repositories: [repo] });
    try {
      await infer(s.url, 'wants', [1]);
      await infer(s.url, 'wants', [1]);
      const st = await stats(s.url, 'wants');
      assert.deepEqual([st.execution_count, st.inference_stats.cache_hit.count], [2, 0]);
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });
});
