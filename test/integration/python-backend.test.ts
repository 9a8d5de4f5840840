import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startNereid, type TestServer } from '../helpers/server.js';
import { EXAMPLES, FIXTURES } from '../helpers/python-models.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';

/**
 * Python models (model.py, the python backend's stub processes) through the real server, over HTTP and gRPC:
 * the add_sub example, BLS back into the server, auto-complete without config.pbtxt, and the fault rules (an
 * exception fails its request only; a crash fails the request in flight, names the instance, and the instance is
 * restarted; a load whose initialize raises leaves the model UNAVAILABLE with the reason).
 */

interface InferBody {
  error?: string;
  outputs?: { name: string; data: number[]; datatype: string; shape: number[] }[];
}

async function infer(url: string, model: string, body: unknown): Promise<{ status: number; body: InferBody }> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as InferBody };
}

const fp32 = (name: string, data: number[]) => ({ name, datatype: 'FP32', shape: [data.length], data });
const addSubBody = { inputs: [fp32('INPUT0', [1, 2, 3, 4]), fp32('INPUT1', [10, 20, 30, 40])] };

describe('python backend through the server', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ repositories: [EXAMPLES, FIXTURES], exitOnError: false });
  });
  after(() => s?.close());

  it('serves add_sub over HTTP', async () => {
    const { status, body } = await infer(s.url, 'add_sub', addSubBody);
    assert.equal(status, 200, body.error);
    assert.deepEqual(
      body.outputs?.map((o) => [o.name, o.data]),
      [
        ['OUTPUT0', [11, 22, 33, 44]],
        ['OUTPUT1', [-9, -18, -27, -36]],
      ],
    );
  });

  it('serves add_sub over gRPC', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const input = (name: string, v: number[]) => ({
        name,
        datatype: 'FP32',
        shape: [4],
        contents: { fp32_contents: v },
      });
      const res = await callUnary<{ raw_output_contents: Buffer[]; outputs: { name: string }[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'add_sub',
          inputs: [input('INPUT0', [1, 2, 3, 4]), input('INPUT1', [1, 1, 1, 1])],
        },
      );
      const out0 = new Float32Array(new Uint8Array(res.raw_output_contents[0]).buffer);
      assert.deepEqual([...out0], [2, 3, 4, 5]);
    } finally {
      client.close();
    }
  });

  it('runs BLS calls back into the server (sync and async)', async () => {
    for (const parameters of [{}, { async: true }]) {
      const { status, body } = await infer(s.url, 'bls', {
        parameters,
        inputs: [{ name: 'MODEL_NAME', datatype: 'BYTES', shape: [1], data: ['add_sub'] }, ...addSubBody.inputs],
      });
      assert.equal(status, 200, body.error);
      assert.deepEqual(body.outputs?.[0].data, [11, 22, 33, 44]);
    }
    const stats = (await (await fetch(`${s.url}/v2/models/add_sub/stats`)).json()) as {
      model_stats: { inference_count: number }[];
    };
    assert.ok(stats.model_stats[0].inference_count >= 4, 'BLS calls are counted as add_sub inferences');
  });

  it("REGRESSION a BLS call past its timeout fails as Triton's: UNAVAILABLE 'Request timeout expired', not CANCELLED", async () => {
    const { status, body } = await infer(s.url, 'bls', {
      parameters: { timeout_us: 200_000 },
      inputs: [{ name: 'MODEL_NAME', datatype: 'BYTES', shape: [1], data: ['slow_add_sub'] }, ...addSubBody.inputs],
    });
    assert.notEqual(status, 200);
    assert.match(body.error ?? '', /Request timeout expired/);
    assert.doesNotMatch(body.error ?? '', /cancelled/);
  });

  it('runs BLS calls to a decoupled model (exec(decoupled=True) iterates its responses)', async () => {
    const { status, body } = await infer(s.url, 'bls_decoupled', {
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [3] }],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(
      body.outputs?.map((o) => [o.name, o.data]),
      [
        ['COUNT', [3]],
        ['SUM', [9]],
      ],
    );
  });

  it('completes a config from auto_complete_config (no config.pbtxt)', async () => {
    const cfg = (await (await fetch(`${s.url}/v2/models/auto_complete/config`)).json()) as {
      max_batch_size: number;
      input: { name: string }[];
    };
    assert.equal(cfg.max_batch_size, 4);
    assert.deepEqual(
      cfg.input.map((i) => i.name),
      ['INPUT0', 'INPUT1'],
    );
    const { status, body } = await infer(s.url, 'auto_complete', {
      inputs: [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] },
        { name: 'INPUT1', datatype: 'FP32', shape: [1, 4], data: [1, 1, 1, 1] },
      ],
    });
    assert.equal(status, 200, body.error);
    assert.deepEqual(body.outputs?.[0].data, [2, 3, 4, 5]);
  });

  it('streams a decoupled model over HTTP generate_stream (server-sent events)', async () => {
    const res = await fetch(`${s.url}/v2/models/repeat/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [4, 5, 6], DELAY: [10, 10, 10], WAIT: 10 }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as { OUT: number; IDX: number; model_name: string });
    assert.deepEqual(
      events.map((e) => [e.OUT, e.IDX]),
      [
        [4, 0],
        [5, 1],
        [6, 2],
      ],
    );
    assert.equal(events[0].model_name, 'repeat');
  });

  it('BAD CALL - generate_stream sends an error event for a BYTES response that is not UTF-8, never U+FFFD', async () => {
    const res = await fetch(`${s.url}/v2/models/raw_bytes/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [0, 1, 0] }),
    });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.ok(!text.includes('\uFFFD'), text);
    const events = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as { OUT?: string; error?: string });
    assert.equal(events.length, 3, text);
    assert.equal(events[0].OUT, 'ok');
    assert.match(events[1].error ?? '', /Failed to encode output 'OUT' using UTF-8: element 0 is not valid UTF-8/);
    assert.equal(events[2].OUT, 'ok');
  });

  it('answers generate with one JSON object (add_sub), inputs typed by the model', async () => {
    const res = await fetch(`${s.url}/v2/models/add_sub/generate`, {
      method: 'POST',
      body: JSON.stringify({ INPUT0: [1, 2, 3, 4], INPUT1: [1, 1, 1, 1], parameters: { note: 'x' } }),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), {
      model_name: 'add_sub',
      model_version: '1',
      OUTPUT0: [2, 3, 4, 5],
      OUTPUT1: [0, 1, 2, 3],
    });
  });

  it('BAD CALL - a decoupled model on /infer is refused with where to go instead', async () => {
    const { status, body } = await infer(s.url, 'square', {
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [2] }],
    });
    assert.equal(status, 501);
    assert.match(
      body.error ?? '',
      /doesn't support models with decoupled transaction policy; use gRPC ModelStreamInfer/,
    );
    // The advice keeps its route whole: redaction takes server paths only (issue 26 item 8), not '…/generate_stream'.
    assert.ok(body.error?.includes('HTTP POST /v2/models/square/generate_stream'), body.error);
    const gen = await fetch(`${s.url}/v2/models/square/generate`, { method: 'POST', body: JSON.stringify({ IN: 2 }) });
    assert.equal(gen.status, 400);
    assert.match(((await gen.json()) as { error: string }).error, /sent more than one; use generate_stream/);
  });

  it('BAD MODEL - initialize() raising leaves the model UNAVAILABLE with the exception', async () => {
    const index = (await (await fetch(`${s.url}/v2/repository/index`, { method: 'POST' })).json()) as {
      name: string;
      state: string;
      reason: string;
    }[];
    const m = index.find((e) => e.name === 'init_raises');
    assert.equal(m?.state, 'UNAVAILABLE');
    assert.match(m?.reason ?? '', /RuntimeError: weights not found under/);
  });

  it('BAD MODEL - an exception in execute answers 500 with it, and the model serves on', async () => {
    const x = { inputs: [fp32('INPUT0', [1, 2, 3, 4])] };
    const bad = await infer(s.url, 'faulty', { ...x, parameters: { mode: 'raise' } });
    assert.equal(bad.status, 500);
    assert.match(
      bad.body.error ?? '',
      /^Failed to process the request\(s\) for model instance 'faulty_0', message: ValueError: boom from execute/,
    );
    assert.doesNotMatch(bad.body.error ?? '', /nereid_python/, 'the stub frames are not in the traceback');
    const ok = await infer(s.url, 'faulty', x);
    assert.equal(ok.status, 200);
  });

  it('BAD MODEL - a segfault fails the request in flight naming the instance; the instance restarts', async () => {
    const x = { inputs: [fp32('INPUT0', [1, 2, 3, 4])] };
    const bad = await infer(s.url, 'faulty', { ...x, parameters: { mode: 'segv' } });
    assert.equal(bad.status, 500);
    assert.match(bad.body.error ?? '', /instance faulty_0 \(python process \d+\) exited with signal SIGSEGV/);
    let ok = await infer(s.url, 'faulty', x);
    for (let i = 0; i < 50 && ok.status !== 200; i++) {
      await sleep(100);
      ok = await infer(s.url, 'faulty', x);
    }
    assert.equal(ok.status, 200, ok.body.error);
  });
});

describe('load requests carrying code', () => {
  const model = `import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", r.inputs()[0].as_numpy() * 2)]) for r in requests]
`;
  const config = JSON.stringify({
    backend: 'python',
    input: [{ name: 'INPUT0', data_type: 'TYPE_FP32', dims: [2] }],
    output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [2] }],
  });
  const load = (url: string) =>
    fetch(`${url}/v2/repository/models/doubler/load`, {
      method: 'POST',
      body: JSON.stringify({ parameters: { config, 'file:1/model.py': Buffer.from(model).toString('base64') } }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: string } }));

  it('BAD CALL - are refused without --allow-code-in-load-requests', async () => {
    const s = await startNereid({ repositories: [FIXTURES], modelControlMode: 'explicit' });
    try {
      const r = await load(s.url);
      assert.equal(r.status, 400);
      assert.match(r.body.error ?? '', /carries code \(file:1\/model.py\).*--allow-code-in-load-requests/);
    } finally {
      await s.close();
    }
  });

  it('are served with --allow-code-in-load-requests', async () => {
    const s = await startNereid({
      repositories: [FIXTURES],
      modelControlMode: 'explicit',
      allowCodeInLoadRequests: true,
    });
    try {
      const r = await load(s.url);
      assert.equal(r.status, 200, r.body.error);
      const { status, body } = await infer(s.url, 'doubler', { inputs: [fp32('INPUT0', [1.5, -2])] });
      assert.equal(status, 200, body.error);
      assert.deepEqual(body.outputs?.[0].data, [3, -4]);
    } finally {
      await s.close();
    }
  });
});
