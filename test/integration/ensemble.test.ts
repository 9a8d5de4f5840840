import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { accumulatorModel, addSubModel, ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Ensembles on a real server over HTTP and gRPC: a diamond of onnxruntime steps (one tensor read by two steps),
 * an ensemble nested in an ensemble, steps batched by their own model's batcher, load order and dependents, and
 * the load errors of bad graphs.
 */

const i32 = (name: string, dims = '[ 16 ]') => `{ name: "${name}" data_type: TYPE_INT32 dims: ${dims} }`;
const step = (model: string, inputs: Record<string, string>, outputs: Record<string, string>) =>
  `{ model_name: "${model}" model_version: -1
     ${Object.entries(inputs)
       .map(([k, v]) => `input_map { key: "${k}" value: "${v}" }`)
       .join(' ')}
     ${Object.entries(outputs)
       .map(([k, v]) => `output_map { key: "${k}" value: "${v}" }`)
       .join(' ')} }`;
const ensemble = (inputs: string[], outputs: string[], steps: string[], mbs = 8, dims = '[ 16 ]') =>
  `platform: "ensemble" max_batch_size: ${mbs}
   input [ ${inputs.map((n) => i32(n, dims)).join(', ')} ]
   output [ ${outputs.map((n) => i32(n, dims)).join(', ')} ]
   ensemble_scheduling { step [ ${steps.join(', ')} ] }`;

const ADD_SUB = `backend: "onnxruntime" max_batch_size: 8 dynamic_batching { }
  input [ ${i32('INPUT0')}, ${i32('INPUT1')} ] output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ]`;

/**
 * diamond(A, B): S, D = A+B, A-B; then in parallel X, Y = S+D, S-D (= 2A, 2B) and Z, W = S+B, S-B (= A+2B, A);
 * then OUT_SUM, OUT_DIFF = X+Z, X-Z (= 3A+2B, A-2B). S and B are each read by two steps.
 */
const DIAMOND = ensemble(
  ['A', 'B'],
  ['OUT_SUM', 'OUT_DIFF', 'Y', 'W'],
  [
    step('add_sub', { INPUT0: 'A', INPUT1: 'B' }, { OUTPUT0: 'S', OUTPUT1: 'D' }),
    step('add_sub', { INPUT0: 'S', INPUT1: 'D' }, { OUTPUT0: 'X', OUTPUT1: 'Y' }),
    step('add_sub', { INPUT0: 'S', INPUT1: 'B' }, { OUTPUT0: 'Z', OUTPUT1: 'W' }),
    step('add_sub', { INPUT0: 'X', INPUT1: 'Z' }, { OUTPUT0: 'OUT_SUM', OUTPUT1: 'OUT_DIFF' }),
  ],
);

const slowIdentity = `backend: "identity" max_batch_size: 8 input [ ${i32('INPUT0', '[ -1 ]')} ] output [ ${i32('OUTPUT0', '[ -1 ]')} ]
  instance_group [{ count: 1 kind: KIND_CPU }] dynamic_batching { max_queue_delay_microseconds: 100000 }
  parameters { key: "execute_delay_ms" value { string_value: "50" } }`;

const MODELS: Record<string, string> = {
  add_sub: ADD_SUB,
  diamond: DIAMOND,
  // An ensemble whose first step is the diamond ensemble.
  nested: ensemble(
    ['A', 'B'],
    ['R0', 'R1'],
    [
      step('diamond', { A: 'A', B: 'B' }, { OUT_SUM: 'P', OUT_DIFF: 'Q', Y: 'Y', W: 'W' }),
      step('add_sub', { INPUT0: 'P', INPUT1: 'Q' }, { OUTPUT0: 'R0', OUTPUT1: 'R1' }),
      step('add_sub', { INPUT0: 'Y', INPUT1: 'W' }, { OUTPUT0: 'R2', OUTPUT1: 'R3' }),
      step('add_sub', { INPUT0: 'R2', INPUT1: 'R3' }, { OUTPUT0: 'R4', OUTPUT1: 'R5' }),
    ],
  ).replace(
    'output [',
    'output [ { name: "R4" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "R5" data_type: TYPE_INT32 dims: [ 16 ] }, ',
  ),
  slow: slowIdentity,
  via_slow: ensemble(['IN'], ['OUT'], [step('slow', { INPUT0: 'IN' }, { OUTPUT0: 'OUT' })], 8, '[ -1 ]'),
  // A stateful step: the ensemble's sequence parameters reach it, the add_sub step ignores them.
  acc: `backend: "onnxruntime" max_batch_size: 4 instance_group [{ count: 1 kind: KIND_CPU }]
    input [ ${i32('INPUT', '[ 1 ]')} ] output [ ${i32('OUTPUT', '[ 1 ]')} ]
    sequence_batching { control_input [
      { name: "START" control [{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }] },
      { name: "END" control [{ kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] }] },
      { name: "READY" control [{ kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] }] } ]
      state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }] }`,
  running_sum: ensemble(['X'], ['SUM'], [step('acc', { INPUT: 'X' }, { OUTPUT: 'SUM' })], 4, '[ 1 ]'),
  // Takes any length; its step takes 16.
  loose: ensemble(
    ['A', 'B'],
    ['S', 'D'],
    [step('add_sub', { INPUT0: 'A', INPUT1: 'B' }, { OUTPUT0: 'S', OUTPUT1: 'D' })],
    8,
    '[ -1 ]',
  ),
};

interface Out {
  name: string;
  data: number[];
  shape: number[];
}
interface Reply {
  status: number;
  body: { error?: string; outputs?: Out[] };
}

async function infer(url: string, model: string, inputs: Record<string, number[]>, shape = [1, 16]): Promise<Reply> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: Object.entries(inputs).map(([name, data]) => ({ name, shape, datatype: 'INT32', data })),
    }),
  });
  return { status: res.status, body: (await res.json()) as Reply['body'] };
}

const outputs = (r: Reply): Record<string, number[]> => {
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return Object.fromEntries((r.body.outputs ?? []).map((o) => [o.name, o.data]));
};

const A = Array.from({ length: 16 }, (_, i) => i);
const B = Array.from({ length: 16 }, (_, i) => 100 + 2 * i);
const zip = (f: (a: number, b: number) => number) => A.map((a, i) => f(a, B[i]));

interface Stats {
  inference_count: number;
  execution_count: number;
  inference_stats: { success: { count: number }; fail?: { count: number } };
  batch_stats: { batch_size: number; compute_infer: { count: number } }[];
}
async function stats(url: string, model: string): Promise<Stats> {
  const res = await fetch(`${url}/v2/models/${model}/stats`);
  return ((await res.json()) as { model_stats: Stats[] }).model_stats[0];
}

async function writeRepo(models: Record<string, string>): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-ens-'));
  for (const [name, config] of Object.entries(models)) {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), config);
    if (config.includes('onnxruntime')) {
      const onnx = config.includes('sequence_batching') ? accumulatorModel() : addSubModel(ELEM.INT32);
      await writeModel(join(repo, name, '1', 'model.onnx'), onnx);
    }
  }
  return repo;
}

describe('ensembles', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    repo = await writeRepo(MODELS);
    s = await startNereid({ repositories: [repo] });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('runs a diamond of steps; a tensor read by two steps reaches both intact', async () => {
    const before = await stats(s.url, 'add_sub');
    const o = outputs(await infer(s.url, 'diamond', { A, B }));
    assert.deepEqual(
      o.OUT_SUM,
      zip((a, b) => 3 * a + 2 * b),
    );
    assert.deepEqual(
      o.OUT_DIFF,
      zip((a, b) => a - 2 * b),
    );
    assert.deepEqual(
      o.Y,
      zip((_a, b) => 2 * b),
    );
    assert.deepEqual(o.W, A);
    // Four steps, each a request of the composing model in its own statistics.
    const after = await stats(s.url, 'add_sub');
    assert.equal(after.inference_stats.success.count - before.inference_stats.success.count, 4);
    const ens = await stats(s.url, 'diamond');
    assert.equal(ens.inference_stats.success.count, 1);
    assert.equal(ens.execution_count, 0);
  });

  it('runs an ensemble nested in an ensemble (depth 2, seven add_sub runs)', async () => {
    const o = outputs(await infer(s.url, 'nested', { A, B }));
    const p = zip((a, b) => 3 * a + 2 * b);
    const q = zip((a, b) => a - 2 * b);
    assert.deepEqual(
      o.R0,
      p.map((x, i) => x + q[i]),
    );
    assert.deepEqual(
      o.R1,
      p.map((x, i) => x - q[i]),
    );
    // R2, R3 = Y+W, Y-W; R4, R5 = R2+R3, R2-R3 = 2Y, 2W.
    assert.deepEqual(
      o.R4,
      zip((_a, b) => 4 * b),
    );
    assert.deepEqual(
      o.R5,
      A.map((a) => 2 * a),
    );
  });

  it("batches concurrent ensemble requests in the step model's own dynamic batcher", async () => {
    const rs = await Promise.all([1, 2, 3, 4].map((v) => infer(s.url, 'via_slow', { IN: [v, v] }, [1, 2])));
    assert.deepEqual(
      rs.map((r) => outputs(r).OUT),
      [
        [1, 1],
        [2, 2],
        [3, 3],
        [4, 4],
      ],
    );
    const st = await stats(s.url, 'slow');
    assert.equal(st.inference_count, 4);
    assert.ok(st.execution_count < 4, `expected batching, got ${st.execution_count} executions`);
  });

  it('forwards the sequence parameters to a stateful step (a running sum through an ensemble)', async () => {
    const sums: number[] = [];
    for (const [i, x] of [5, 6, 7].entries()) {
      const res = await fetch(`${s.url}/v2/models/running_sum/infer`, {
        method: 'POST',
        body: JSON.stringify({
          inputs: [{ name: 'X', shape: [1, 1], datatype: 'INT32', data: [x] }],
          parameters: { sequence_id: 'ens-1', sequence_start: i === 0, sequence_end: i === 2 },
        }),
      });
      const body = (await res.json()) as Reply['body'];
      assert.equal(res.status, 200, JSON.stringify(body));
      sums.push(body.outputs?.[0].data[0] as number);
    }
    assert.deepEqual(sums, [5, 11, 18]);
    const r = await infer(s.url, 'running_sum', { X: [1] }, [1, 1]);
    assert.equal(r.status, 400);
    assert.match(
      r.body.error ?? '',
      /^in ensemble 'running_sum', inference request to model 'acc' must specify a non-zero or non-empty correlation ID/,
    );
  });

  it('CANCEL - a client that goes away cancels the step it was waiting for', async () => {
    const failed = async () => (await stats(s.url, 'slow')).inference_stats.fail?.count ?? 0;
    const before = await failed();
    // The slow step waits up to 100 ms in its batcher's queue: the client leaves after 20 ms.
    await assert.rejects(
      fetch(`${s.url}/v2/models/via_slow/infer`, {
        method: 'POST',
        signal: AbortSignal.timeout(20),
        body: JSON.stringify({ inputs: [{ name: 'IN', shape: [1, 1], datatype: 'INT32', data: [1] }] }),
      }),
    );
    for (let i = 0; i < 50 && (await failed()) === before; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal((await failed()) - before, 1);
  });

  it('runs the diamond over gRPC with raw contents', async () => {
    const r = await callUnary<{ outputs: { name: string }[]; raw_output_contents: Buffer[] }>(client, 'ModelInfer', {
      model_name: 'diamond',
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 16] },
        { name: 'B', datatype: 'INT32', shape: [1, 16] },
      ],
      outputs: [{ name: 'OUT_SUM' }],
      raw_input_contents: [int32Bytes(A), int32Bytes(B)],
    });
    assert.deepEqual(
      r.outputs.map((o) => o.name),
      ['OUT_SUM'],
    );
    assert.deepEqual(
      int32Of(r.raw_output_contents[0]),
      zip((a, b) => 3 * a + 2 * b),
    );
  });

  it("BAD REQUEST - a step that refuses its input answers with the step's error, prefixed with the ensemble", async () => {
    const r = await infer(s.url, 'loose', { A: A.slice(0, 8), B: B.slice(0, 8) }, [1, 8]);
    assert.equal(r.status, 400);
    assert.match(
      r.body.error ?? '',
      /^in ensemble 'loose', unexpected shape for input 'INPUT0' for model 'add_sub'\. Expected \[-1,16\], got \[1,8\]/,
    );
  });
});

describe('ensembles: load order, dependents and bad graphs', () => {
  it('explicit mode: loading an ensemble loads its composing model; unloading that model makes the ensemble UNAVAILABLE naming it; unload_dependents unloads it', async () => {
    const repo = await writeRepo({ add_sub: ADD_SUB, diamond: DIAMOND });
    const s = await startNereid({ repositories: [repo], modelControlMode: 'explicit' });
    const post = (path: string, body: unknown = {}) =>
      fetch(`${s.url}${path}`, { method: 'POST', body: JSON.stringify(body) }).then(async (r) => ({
        status: r.status,
        body: (await r.json().catch(() => ({}))) as { error?: string },
      }));
    const ready = async (m: string) => (await fetch(`${s.url}/v2/models/${m}/ready`)).status;
    try {
      assert.equal((await post('/v2/repository/models/diamond/load')).status, 200);
      assert.equal(await ready('add_sub'), 200);
      assert.equal(outputs(await infer(s.url, 'diamond', { A, B })).W.length, 16);

      assert.equal((await post('/v2/repository/models/add_sub/unload')).status, 200);
      assert.equal(await ready('diamond'), 400);
      const r = await infer(s.url, 'diamond', { A, B });
      // The repository has the ensemble but cannot serve it now: UNAVAILABLE with the reason, not "not found".
      assert.equal(r.status, 503);
      assert.match(r.body.error ?? '', /'diamond' is not available now: .*composing model 'add_sub' is not available/);

      // Loading the composing model again brings the ensemble back.
      assert.equal((await post('/v2/repository/models/add_sub/load')).status, 200);
      assert.equal(await ready('diamond'), 200);

      const u = await post('/v2/repository/models/add_sub/unload', { parameters: { unload_dependents: true } });
      assert.equal(u.status, 200);
      const index = (await (await fetch(`${s.url}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string;
        state: string;
        reason: string;
      }[];
      assert.deepEqual(
        index.filter((m) => m.name === 'diamond').map((m) => [m.state, m.reason]),
        [['UNAVAILABLE', 'unloaded']],
      );
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });

  it('BAD CONFIG - a map naming a missing tensor, a cycle, a non-existing step input, an unknown step model and an unused tensor fail their loads, naming them', async () => {
    const bad: Record<string, string> = {
      add_sub: ADD_SUB,
      missing_tensor: ensemble(['A', 'B'], ['S'], [step('add_sub', { INPUT0: 'A', INPUT1: 'NOPE' }, { OUTPUT0: 'S' })]),
      cycle: ensemble(
        ['A'],
        ['OUT'],
        [
          step('add_sub', { INPUT0: 'A', INPUT1: 'T1' }, { OUTPUT0: 'T0', OUTPUT1: 'OUT' }),
          step('add_sub', { INPUT0: 'T0', INPUT1: 'A' }, { OUTPUT0: 'T1' }),
        ],
      ),
      bad_input: ensemble(['A', 'B'], ['S'], [step('add_sub', { INPUT0: 'A', INPUTX: 'B' }, { OUTPUT0: 'S' })]),
      unknown_model: ensemble(['A', 'B'], ['S'], [step('nope', { INPUT0: 'A', INPUT1: 'B' }, { OUTPUT0: 'S' })]),
      unused: ensemble(
        ['A', 'B'],
        ['S'],
        [step('add_sub', { INPUT0: 'A', INPUT1: 'B' }, { OUTPUT0: 'S', OUTPUT1: 'D' })],
      ),
      namespaced: ensemble(
        ['A', 'B'],
        ['S', 'D'],
        [
          step('add_sub', { INPUT0: 'A', INPUT1: 'B' }, { OUTPUT0: 'S', OUTPUT1: 'D' }).replace(
            'model_version',
            'model_namespace: "ns" model_version',
          ),
        ],
      ),
      self_cycle_a: ensemble(['A'], ['S'], [step('self_cycle_b', { A: 'A' }, { S: 'S' })], 8),
      self_cycle_b: ensemble(['A'], ['S'], [step('self_cycle_a', { A: 'A' }, { S: 'S' })], 8),
    };
    const repo = await writeRepo(bad);
    const s = await startNereid({ repositories: [repo], exitOnError: false });
    try {
      const index = (await (await fetch(`${s.url}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string;
        state: string;
        reason: string;
      }[];
      const reason = (n: string) => index.find((m) => m.name === n)?.reason ?? '';
      assert.match(
        reason('missing_tensor'),
        /step 0 \('add_sub'\) maps its input 'INPUT1' to ensemble tensor 'NOPE', which is neither an ensemble input nor an output of any step/,
      );
      assert.match(
        reason('cycle'),
        /ensemble 'cycle' has a cycle: step \d \('add_sub'\) → step \d \('add_sub'\) → step \d/,
      );
      assert.match(reason('bad_input'), /ensemble tensor B is mapping to non-existing input INPUTX in model add_sub/);
      assert.match(reason('unknown_model'), /'nope' is not in any model repository/);
      assert.match(reason('unused'), /ensemble tensor 'D' is unused in ensemble 'unused'/);
      assert.match(reason('self_cycle_a') + reason('self_cycle_b'), /depend on each other \(a cycle of ensembles\)/);
      assert.match(reason('namespaced'), /step 0 sets model_namespace 'ns'; model namespacing is not supported/);
      assert.equal(index.find((m) => m.name === 'add_sub')?.state, 'READY');
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
  });
});
