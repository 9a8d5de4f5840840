import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { addSubModel, ELEM, writeModel, type GraphSpec } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * The response cache across loads of one model name and version: a reload (new model file or new config, by the
 * load API over HTTP and gRPC, or by a poll) and an unload drop the model's cached answers, and a request still
 * running on the old load when the new one took over never stores an answer that the new load then serves.
 */

const CACHED = 'response_cache { enable: true }';
const i32 = (n: string) => `{ name: "${n}" data_type: TYPE_INT32 dims: [ 16 ] }`;
const ADD_SUB = `backend: "onnxruntime" max_batch_size: 8 input [ ${i32('INPUT0')}, ${i32('INPUT1')} ]
  output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ] ${CACHED}`;

/** The add_sub graph with its outputs swapped: OUTPUT0 = INPUT0 - INPUT1, OUTPUT1 = INPUT0 + INPUT1. */
function subAddModel(): GraphSpec {
  return {
    ...addSubModel(ELEM.INT32),
    nodes: [
      { op: 'Sub', inputs: ['INPUT0', 'INPUT1'], outputs: ['OUTPUT0'] },
      { op: 'Add', inputs: ['INPUT0', 'INPUT1'], outputs: ['OUTPUT1'] },
    ],
  };
}

/** An ensemble of one step, swap, with the same tensor names, its answers cached. */
const OUTER = `platform: "ensemble" max_batch_size: 8 input [ ${i32('INPUT0')}, ${i32('INPUT1')} ]
  output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ] ${CACHED}
  ensemble_scheduling { step [ { model_name: "swap" model_version: -1
    input_map { key: "INPUT0" value: "INPUT0" } input_map { key: "INPUT1" value: "INPUT1" }
    output_map { key: "OUTPUT0" value: "OUTPUT0" } output_map { key: "OUTPUT1" value: "OUTPUT1" } } ] }`;

const A = Array.from({ length: 16 }, (_, i) => 10 + i);
const B = Array(16).fill(3);
const SUM = A.map((x, i) => x + B[i]);
const DIFF = A.map((x, i) => x - B[i]);

interface Stats {
  version: string;
  execution_count: number;
  inference_stats: Record<'success' | 'cache_hit' | 'cache_miss', { count: number; ns: number }>;
}
async function stats(url: string, model: string): Promise<Stats> {
  const r = await fetch(`${url}/v2/models/${model}/stats`);
  return ((await r.json()) as { model_stats: Stats[] }).model_stats[0];
}
const cacheCounts = (st: Stats) => [st.inference_stats.cache_hit.count, st.inference_stats.cache_miss.count];

/** OUTPUT0 of add_sub-like `model` over HTTP (JSON). */
async function httpOutput0(url: string, model: string): Promise<number[]> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: A },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: B },
      ],
      outputs: [{ name: 'OUTPUT0' }],
    }),
  });
  const body = (await res.json()) as { error?: string; outputs?: { data: number[] }[] };
  assert.equal(res.status, 200, body.error);
  return body.outputs?.[0].data ?? [];
}

/** The same request over gRPC (raw contents). */
async function grpcOutput0(client: grpc.Client, model: string): Promise<number[]> {
  const reply = await callUnary<{ raw_output_contents: Buffer[] }>(client, 'ModelInfer', {
    model_name: model,
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
    ],
    outputs: [{ name: 'OUTPUT0' }],
    raw_input_contents: [int32Bytes(A), int32Bytes(B)],
  });
  return int32Of(reply.raw_output_contents[0]);
}

async function repoOf(models: Record<string, string>): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-cache-reload-'));
  for (const [name, config] of Object.entries(models)) {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), config);
    if (config.includes('onnxruntime')) await writeModel(join(repo, name, '1', 'model.onnx'), addSubModel(ELEM.INT32));
  }
  return repo;
}

describe('response cache: explicit reloads and unloads', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    repo = await repoOf({ swap: ADD_SUB, outer: OUTER });
    s = await startNereid({
      repositories: [repo],
      responseCacheBytes: 1 << 20,
      modelControlMode: 'explicit',
      loadModels: ['swap', 'outer'],
    });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('a reload of a new model file answers with the new model, over HTTP and gRPC', async () => {
    assert.deepEqual(await httpOutput0(s.url, 'swap'), SUM);
    assert.deepEqual(await grpcOutput0(client, 'swap'), SUM, 'a hit of the first answer');
    assert.deepEqual(cacheCounts(await stats(s.url, 'swap')), [1, 1]);

    await writeModel(join(repo, 'swap', '1', 'model.onnx'), subAddModel());
    const load = await fetch(`${s.url}/v2/repository/models/swap/load`, { method: 'POST' });
    assert.equal(load.status, 200);
    assert.deepEqual(await httpOutput0(s.url, 'swap'), DIFF, 'HTTP: the new model computes it');
    assert.deepEqual(await grpcOutput0(client, 'swap'), DIFF, 'gRPC: a hit of the new answer');
    const st = await stats(s.url, 'swap');
    assert.deepEqual([st.execution_count, ...cacheCounts(st)], [1, 1, 1]);
  });

  it('an unload and a load over gRPC answer with the model loaded last', async () => {
    await writeModel(join(repo, 'swap', '1', 'model.onnx'), addSubModel(ELEM.INT32));
    await callUnary(client, 'RepositoryModelUnload', { model_name: 'swap' });
    await callUnary(client, 'RepositoryModelLoad', { model_name: 'swap' });
    assert.deepEqual(await grpcOutput0(client, 'swap'), SUM, 'gRPC: the reloaded model computes it');
    assert.deepEqual(await httpOutput0(s.url, 'swap'), SUM, 'HTTP: a hit of the new answer');
    const st = await stats(s.url, 'swap');
    assert.deepEqual([st.execution_count, ...cacheCounts(st)], [1, 1, 1]);
  });

  it("a reload of an ensemble's composing model drops the ensemble's cached answers", async () => {
    assert.deepEqual(await httpOutput0(s.url, 'outer'), SUM);
    assert.deepEqual(await grpcOutput0(client, 'outer'), SUM, 'a hit of the first answer');
    await writeModel(join(repo, 'swap', '1', 'model.onnx'), subAddModel());
    await callUnary(client, 'RepositoryModelLoad', { model_name: 'swap' });
    assert.deepEqual(await grpcOutput0(client, 'outer'), DIFF, 'gRPC: the ensemble runs the new step');
    assert.deepEqual(await httpOutput0(s.url, 'outer'), DIFF, 'HTTP: a hit of the new answer');
    assert.deepEqual(cacheCounts(await stats(s.url, 'outer')), [2, 2]);
  });
});

/** Identity echoes output i from input i by position: the config's output order decides the answer. */
const flipConfig = (first: string, second: string, delayMs: number) => `backend: "identity" max_batch_size: 0
  input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1, 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 1, 16 ] }]
  output [{ name: "${first}" data_type: TYPE_INT32 dims: [ 1, 16 ] }, { name: "${second}" data_type: TYPE_INT32 dims: [ 1, 16 ] }]
  instance_group [{ count: 1 kind: KIND_CPU }] parameters { key: "execute_delay_ms" value { string_value: "${delayMs}" } } ${CACHED}`;

/** Waits (bounded) until `ok()` holds; what the server observed, not a time, decides. */
async function until(ok: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (await ok()) return;
    await sleep(50);
  }
  assert.fail(`never observed: ${what}`);
}

describe('response cache: a new config', () => {
  it('a request running on the old load while the new config loads stores nothing the new load serves', async () => {
    const repo = await repoOf({ flip: flipConfig('OUTPUT0', 'OUTPUT1', 3000) });
    const s = await startNereid({
      repositories: [repo],
      responseCacheBytes: 1 << 20,
      modelControlMode: 'explicit',
      loadModels: ['flip'],
    });
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      // The old load runs this request; one more behind it is queued, which shows the first is executing.
      let oldDone = false;
      const old = httpOutput0(s.url, 'flip').finally(() => (oldDone = true));
      const queued = grpcOutput0(client, 'flip').catch(() => undefined);
      const pending = /^nv_inference_pending_request_count\{model="flip",version="1"\} 1$/m;
      await until(
        async () => pending.test(await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text()),
        'the second request queued behind the first',
      );

      await writeFile(join(repo, 'flip', 'config.pbtxt'), flipConfig('OUTPUT1', 'OUTPUT0', 0));
      const load = await fetch(`${s.url}/v2/repository/models/flip/load`, { method: 'POST' });
      assert.equal(load.status, 200);
      assert.equal(oldDone, false, 'the old load still runs the first request when the new one serves');
      assert.deepEqual(await old, A, 'the old config: OUTPUT0 echoes INPUT0');
      await queued;

      assert.deepEqual(await httpOutput0(s.url, 'flip'), B, 'HTTP: the new config: OUTPUT0 echoes INPUT1');
      assert.deepEqual(await grpcOutput0(client, 'flip'), B, 'gRPC: a hit of the new answer');
      const st = await stats(s.url, 'flip');
      assert.deepEqual([st.execution_count, ...cacheCounts(st)], [1, 1, 1]);
    } finally {
      client.close();
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });
});

describe('response cache: poll mode', () => {
  it('a poll that reloads a changed model file drops its cached answers', async () => {
    const repo = await repoOf({ polled: ADD_SUB });
    const s = await startNereid({
      repositories: [repo],
      responseCacheBytes: 1 << 20,
      modelControlMode: 'poll',
      // The test polls itself (the server's own timer would race it).
      repositoryPollSecs: 3600,
    });
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      assert.deepEqual(await grpcOutput0(client, 'polled'), SUM);
      assert.deepEqual(await httpOutput0(s.url, 'polled'), SUM);
      await writeModel(join(repo, 'polled', '1', 'model.onnx'), subAddModel());
      // The config changes too (a blank line), so that the poll's fingerprint sees the change even when the
      // file system's clock keeps the model file's mtime and its size is the same.
      await writeFile(join(repo, 'polled', 'config.pbtxt'), `${ADD_SUB}\n`);
      const polled = (await s.server.pollRepository()) as { loaded: string[] };
      assert.deepEqual(polled.loaded, ['polled']);
      assert.deepEqual(await httpOutput0(s.url, 'polled'), DIFF, 'HTTP: the new model computes it');
      assert.deepEqual(await grpcOutput0(client, 'polled'), DIFF, 'gRPC: a hit of the new answer');
    } finally {
      client.close();
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });
});
