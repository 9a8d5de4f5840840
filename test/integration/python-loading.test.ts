import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { createLogger } from '../../src/core/logger.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { EXAMPLES as ONNX_EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * The model loading API of Python models (pb_utils.load_model, unload_model, is_model_ready) through the real
 * server, over HTTP and gRPC: the loader fixture (test/fixtures/python_loading) runs each call from execute and
 * answers what the API returned or raised. The server's model-control rules hold for it as for a client.
 */

const LOADING = fileURLToPath(new URL('../fixtures/python_loading/', import.meta.url));
const SIMPLE_ONNX = fileURLToPath(new URL('../../examples/model_repository/simple/1/model.onnx', import.meta.url));
const ECHO_PY = fileURLToPath(new URL('../fixtures/python_loading/echo/1/model.py', import.meta.url));

/** Runs one loader action over HTTP; resolves with its RESULT text. */
async function act(url: string, ...words: string[]): Promise<string> {
  const res = await fetch(`${url}/v2/models/loader/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'ACTION', datatype: 'BYTES', shape: [words.length], data: words }] }),
  });
  const body = (await res.json()) as { error?: string; outputs?: { data: string[] }[] };
  assert.equal(res.status, 200, body.error);
  return body.outputs![0]!.data[0]!;
}

/** The same over gRPC (BYTES outputs come back length-prefixed in raw_output_contents). */
async function actGrpc(port: number, ...words: string[]): Promise<string> {
  const client = inferenceClient(`127.0.0.1:${port}`);
  try {
    const res = await callUnary<{ raw_output_contents: Buffer[] }>(client, 'ModelInfer', {
      model_name: 'loader',
      inputs: [
        {
          name: 'ACTION',
          datatype: 'BYTES',
          shape: [words.length],
          contents: { bytes_contents: words.map((w) => Buffer.from(w)) },
        },
      ],
    });
    const raw = Buffer.from(res.raw_output_contents[0]!);
    return raw.subarray(4, 4 + raw.readUInt32LE(0)).toString();
  } finally {
    client.close();
  }
}

const post = (url: string, path: string, body: unknown = {}) =>
  fetch(`${url}${path}`, { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as { error?: string },
  }));

async function inferenceCount(url: string, model: string): Promise<number> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  if (res.status !== 200) return 0;
  const body = (await res.json()) as { model_stats: { inference_count: number }[] };
  return body.model_stats.reduce((n, s) => n + s.inference_count, 0);
}

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 3000; i++) {
    if (await check()) return;
    await sleep(10);
  }
  assert.fail(`timed out waiting for ${what}`);
}

const simpleConfig = (name: string) =>
  JSON.stringify({
    name,
    platform: 'onnxruntime_onnx',
    max_batch_size: 8,
    input: ['INPUT0', 'INPUT1'].map((n) => ({ name: n, data_type: 'TYPE_INT32', dims: [16] })),
    output: ['OUTPUT0', 'OUTPUT1'].map((n) => ({ name: n, data_type: 'TYPE_INT32', dims: [16] })),
  });

describe('pb_utils model loading API in explicit mode', () => {
  let s: TestServer;
  const logs: string[] = [];
  before(async () => {
    s = await startNereid({
      repositories: [LOADING, ONNX_EXAMPLES],
      modelControlMode: 'explicit',
      loadModels: ['loader', 'echo'],
      logger: createLogger({ write: (l) => void logs.push(l) }),
    });
  });
  after(() => s?.close());

  it('loads, checks and unloads a repository model from execute (HTTP)', async () => {
    assert.equal(await act(s.url, 'ready', 'simple'), 'False');
    assert.equal(await act(s.url, 'load', 'simple'), 'ok');
    assert.equal(await act(s.url, 'ready', 'simple'), 'True');
    assert.equal(await act(s.url, 'ready', 'simple', '1'), 'True');
    assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 200);
    assert.equal(await act(s.url, 'unload', 'simple'), 'ok');
    assert.equal(await act(s.url, 'ready', 'simple'), 'False');
    assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 400);
  });

  it('does the same over gRPC', async () => {
    assert.equal(await actGrpc(s.grpcPort!, 'load', 'simple'), 'ok');
    assert.equal(await actGrpc(s.grpcPort!, 'ready', 'simple'), 'True');
    assert.equal(await actGrpc(s.grpcPort!, 'unload', 'simple'), 'ok');
    assert.equal(await actGrpc(s.grpcPort!, 'ready', 'simple'), 'False');
  });

  it('loads a model from a config override and file: overrides; the model then serves', async () => {
    const r = await act(
      s.url,
      'load_files',
      'simple_copy',
      simpleConfig('simple_copy'),
      'file:1/model.onnx',
      SIMPLE_ONNX,
    );
    assert.equal(r, 'ok');
    const res = await fetch(`${s.url}/v2/models/simple_copy/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: ['INPUT0', 'INPUT1'].map((name) => ({
          name,
          datatype: 'INT32',
          shape: [1, 16],
          data: Array(16).fill(2),
        })),
      }),
    });
    const body = (await res.json()) as { error?: string; outputs?: { name: string; data: number[] }[] };
    assert.equal(res.status, 200, body.error);
    assert.deepEqual(body.outputs?.find((o) => o.name === 'OUTPUT0')?.data, Array(16).fill(4));
    assert.equal(await act(s.url, 'unload', 'simple_copy'), 'ok');
    // A config override alone: loads the repository's simple under another config.
    assert.equal(await act(s.url, 'load_config', 'simple', simpleConfig('simple')), 'ok');
    assert.equal(await act(s.url, 'unload', 'simple'), 'ok');
  });

  it("BAD CALL - a load carrying code is refused without --allow-code-in-load-requests, and errors raise the server's message", async () => {
    const pyConfig = JSON.stringify({ backend: 'python' });
    const r = await act(s.url, 'load_files', 'py_copy', pyConfig, 'file:1/model.py', ECHO_PY);
    assert.match(r, /^error: .*carries code \(file:1\/model.py\).*--allow-code-in-load-requests/);
    assert.match(await act(s.url, 'load', 'no_such_model'), /^error: failed to load 'no_such_model'/);
    assert.match(await act(s.url, 'load', '../etc'), /^error: /);
    assert.match(await act(s.url, 'unload', 'no_such_model'), /^error: failed to unload 'no_such_model'/);
  });

  it('FAULT - a BLS call to a model being unloaded answers a TritonError with its code, never hangs', async () => {
    const before = await inferenceCount(s.url, 'echo');
    const result = act(s.url, 'bls_until_error', 'echo');
    await until('the BLS loop to reach echo', async () => (await inferenceCount(s.url, 'echo')) > before);
    assert.equal((await post(s.url, '/v2/repository/models/echo/unload')).status, 200);
    // NOT_FOUND (2) or UNAVAILABLE (4), naming the model.
    assert.match(await result, /^bls error [24]: .*'echo'/);
    assert.equal((await post(s.url, '/v2/repository/models/echo/load')).status, 200);
  });

  it("loads from initialize (Triton's documented use) and FAULT - refuses load_model from finalize", async () => {
    assert.equal((await post(s.url, '/v2/repository/models/echo/unload')).status, 200);
    assert.equal((await post(s.url, '/v2/repository/models/fin_loader/load')).status, 200);
    assert.equal(await act(s.url, 'ready', 'echo'), 'True', 'fin_loader loaded echo from its initialize');
    assert.equal((await post(s.url, '/v2/repository/models/fin_loader/unload')).status, 200);
    const said = logs
      .map((l) => (JSON.parse(l) as { msg: string }).msg)
      .filter((m) => m.includes('fin_loader finalize'));
    assert.equal(said.length, 1, said.join('\n'));
    assert.match(said[0]!, /pb_utils\.load_model is not supported during finalize/);
  });

  it('a model unloading itself is answered once the unload is under way (it would wait for its own execute)', async () => {
    assert.equal(await act(s.url, 'unload', 'loader'), 'ok');
    await until('loader to be unloaded', async () => (await fetch(`${s.url}/v2/models/loader/ready`)).status !== 200);
    assert.equal((await post(s.url, '/v2/repository/models/loader/load')).status, 200);
  });

  it('FAULT - load_model from a model that is being unloaded is refused, naming it', async () => {
    const before = await inferenceCount(s.url, 'echo');
    const result = act(s.url, 'hold_then_load', 'simple', 'echo');
    await until('the loader to be in execute', async () => (await inferenceCount(s.url, 'echo')) > before);
    // The unload waits for the loader's execute, which sees itself unloading and then calls load_model.
    const unloaded = post(s.url, '/v2/repository/models/loader/unload');
    assert.match(
      await result,
      /^error: pb_utils\.load_model\('simple'\): model 'loader' \(version 1\) is being unloaded/,
    );
    assert.equal((await unloaded).status, 200);
    assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 400, 'simple was not loaded');
    assert.equal((await post(s.url, '/v2/repository/models/loader/load')).status, 200);
  });
});

describe('pb_utils model loading API under the server rules', () => {
  it("BAD CALL - outside explicit mode load and unload are refused with Triton's message; is_model_ready works", async () => {
    const s = await startNereid({ repositories: [LOADING], exitOnError: false });
    try {
      assert.equal(
        await act(s.url, 'load', 'echo'),
        'error: explicit model load / unload is not allowed if polling is enabled',
      );
      assert.equal(
        await act(s.url, 'unload', 'echo'),
        'error: explicit model load / unload is not allowed if polling is enabled',
      );
      assert.equal(await act(s.url, 'ready', 'echo'), 'True');
    } finally {
      await s.close();
    }
  });

  it('BAD CALL - with the model-repository API restricted, a model (which has no header) may not load', async () => {
    const s = await startNereid({
      repositories: [LOADING],
      modelControlMode: 'explicit',
      loadModels: ['loader'],
      httpRestrictedApi: ['model-repository:admin-key=secret'],
    });
    try {
      assert.match(
        await act(s.url, 'load', 'echo'),
        /^error: pb_utils\.load_model\('echo'\): the model-repository API is restricted on this server \(--http-restricted-api\)/,
      );
      assert.equal(await act(s.url, 'ready', 'echo'), 'False');
    } finally {
      await s.close();
    }
  });
});
