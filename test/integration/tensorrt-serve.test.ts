import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DOUBLE, planBytes, removeModel, seedPlan, writeModel, type FakePlan } from '../helpers/tensorrt.js';
import { startNereid, type TestServer } from '../helpers/server.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';

// The seed's repository layout (`model_2/1/model.plan`, no config.pbtxt) served by the real server over HTTP, with
// the TEST DOUBLE of TensorRT in the engine process (this machine has no GPU: the server is told GPU 0 exists).

function encoderPlan(): FakePlan {
  const i = (name: string) => ({ name, mode: 'INPUT' as const, dtype: 'INT32', shape: [-1, -1] });
  const r: [number[], number[], number[]] = [
    [1, 1],
    [4, 8],
    [8, 8],
  ];
  return {
    io: [i('input_ids'), i('attention_mask'), { name: 'outputs', mode: 'OUTPUT', dtype: 'INT32', shape: [-1, -1] }],
    profiles: [{ input_ids: r, attention_mask: r }],
    compute: { outputs: { op: 'add', args: ['input_ids', 'attention_mask'] } },
  };
}

describe("TensorRT over HTTP: the seed's model_2 with no config", () => {
  let server: TestServer;
  const roots: string[] = [];
  const saved = process.env.PYTHONPATH;
  before(async () => {
    process.env.PYTHONPATH = DOUBLE;
    const a = writeModel('model_2', seedPlan());
    const b = writeModel('encoder', encoderPlan());
    roots.push(a.root, b.root);
    server = await startNereid({ repositories: [a.root, b.root], gpus: [0] });
  });
  after(async () => {
    await server?.close();
    roots.forEach(removeModel);
    if (saved === undefined) delete process.env.PYTHONPATH;
    else process.env.PYTHONPATH = saved;
  });

  it('auto-completes the config (platform tensorrt_plan, max_batch_size from the profile, INT32 inputs)', async () => {
    const cfg = (await (await fetch(`${server.url}/v2/models/model_2/config`)).json()) as Record<string, unknown>;
    assert.equal(cfg.platform, 'tensorrt_plan');
    assert.equal(cfg.max_batch_size, 32);
    assert.deepEqual(
      (cfg.input as { name: string; data_type: string }[]).map((i) => [i.name, i.data_type]),
      [
        ['input_ids', 'TYPE_INT32'],
        ['attention_mask', 'TYPE_INT32'],
        ['token_type_ids', 'TYPE_INT32'],
      ],
    );
  });

  it('answers an INT32 request the way the seed calls it (JSON here; binary the same path)', async () => {
    const ids = Array.from({ length: 16 }, (_, i) => i);
    const body = {
      inputs: [
        { name: 'input_ids', datatype: 'INT32', shape: [1, 16], data: ids },
        { name: 'attention_mask', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
        { name: 'token_type_ids', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(0) },
      ],
      outputs: [{ name: 'outputs' }],
    };
    const res = await fetch(`${server.url}/v2/models/model_2/infer`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(res.status, 200, await res.clone().text());
    const out = (await res.json()) as { outputs: { name: string; shape: number[]; data: number[] }[] };
    assert.deepEqual(out.outputs[0].shape, [1, 16]);
    assert.deepEqual(
      out.outputs[0].data,
      ids.map((x) => x + 1),
    );
  });

  it('BAD REQUEST - a shape outside every profile is a 400 naming the allowed range', async () => {
    const body = {
      inputs: [
        { name: 'input_ids', datatype: 'INT32', shape: [1, 12], data: Array(12).fill(1) },
        { name: 'attention_mask', datatype: 'INT32', shape: [1, 12], data: Array(12).fill(1) },
      ],
    };
    const res = await fetch(`${server.url}/v2/models/encoder/infer`, { method: 'POST', body: JSON.stringify(body) });
    assert.equal(res.status, 400);
    const { error } = (await res.json()) as { error: string };
    assert.match(
      error,
      /input 'input_ids' shape \[1,12\] is outside every optimization profile of this instance \(profile 0: \[1\.\.8,1\.\.8\]\)/,
    );
  });
});

describe('TensorRT plans in load requests', () => {
  const load = (url: string, plan: Buffer) =>
    fetch(`${url}/v2/repository/models/sent/load`, {
      method: 'POST',
      body: JSON.stringify({
        parameters: {
          config: JSON.stringify({ platform: 'tensorrt_plan', max_batch_size: 8 }),
          'file:1/model.plan': plan.toString('base64'),
        },
      }),
    }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: string } }));

  it('BAD CALL - a plan is code (a version-compatible one runs host code): refused without --allow-code-in-load-requests', async () => {
    const a = writeModel('model_2', seedPlan());
    const s = await startNereid({ repositories: [a.root], gpus: [0], modelControlMode: 'explicit' });
    try {
      const r = await load(s.url, planBytes({ ...seedPlan(), version_compatible: true }));
      assert.equal(r.status, 400);
      assert.match(r.body.error ?? '', /carries code \(file:1\/model\.plan\).*--allow-code-in-load-requests/);
      const ready = await fetch(`${s.url}/v2/models/sent/ready`);
      assert.notEqual(ready.status, 200, 'nothing was loaded');
    } finally {
      await s.close();
      removeModel(a.root);
    }
  });
});

describe('TensorRT on a machine without a GPU: a model.plan with no config', () => {
  let server: TestServer;
  let root = '';
  const saved = process.env.PYTHONPATH;
  before(async () => {
    // The double would answer a probe as if a GPU were there: the server must not get that far.
    process.env.PYTHONPATH = DOUBLE;
    root = writeModel('model_2', seedPlan()).root;
    server = await startNereid({ repositories: [root], gpus: [], exitOnError: false });
  });
  after(async () => {
    await server?.close();
    removeModel(root);
    if (saved === undefined) delete process.env.PYTHONPATH;
    else process.env.PYTHONPATH = saved;
  });

  const noGpu = /^model 'model_2': no GPU on this machine .*the 'tensorrt' backend runs on GPUs only$/;

  it('BAD CONFIG - says "no GPU" first over HTTP, not KIND_CPU or KIND_GPU (which the user never wrote)', async () => {
    const res = await fetch(`${server.url}/v2/repository/index`, { method: 'POST', body: '{}' });
    const rows = (await res.json()) as { name: string; state: string; reason: string }[];
    const row = rows.find((r) => r.name === 'model_2');
    assert.equal(row?.state, 'UNAVAILABLE');
    assert.match(row?.reason ?? '', noGpu);
    assert.doesNotMatch(row?.reason ?? '', /KIND_/);
    assert.notEqual((await fetch(`${server.url}/v2/models/model_2/ready`)).status, 200);
  });

  it('BAD CONFIG - and the same over gRPC', async () => {
    const client = inferenceClient(`127.0.0.1:${String(server.grpcPort)}`);
    try {
      const r = await callUnary<{ models: { name: string; state: string; reason: string }[] }>(
        client,
        'RepositoryIndex',
        {},
      );
      const row = r.models.find((m) => m.name === 'model_2');
      assert.equal(row?.state, 'UNAVAILABLE');
      assert.match(row?.reason ?? '', noGpu);
    } finally {
      client.close();
    }
  });
});
