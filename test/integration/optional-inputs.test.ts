import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { overridableModel, symbolicOverridableModel, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, fp32Bytes, fp32Of, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Optional inputs on a real server: `optional: true` inputs may be left out (identity, and batches that keep
 * requests with and without them apart); an onnxruntime model whose graph input B has an initializer loads with
 * B declared, uses the initializer when B is left out and the client's B when sent (HTTP and gRPC).
 */

const f32 = (name: string, dims: string, optional = false) =>
  `{ name: "${name}" data_type: TYPE_FP32 dims: ${dims}${optional ? ' optional: true' : ''} }`;

const MODELS: Record<string, string> = {
  with_default: `backend: "onnxruntime" max_batch_size: 0
    input [ ${f32('A', '[ 2 ]')}, ${f32('B', '[ 2 ]', true)} ] output [ ${f32('Y', '[ 2 ]')} ]`,
  // Auto-complete: B is not added to the inputs (only declared initializers become inputs).
  auto: `backend: "onnxruntime" max_batch_size: 0`,
  // B's graph input is declared ["d1"] (dynamic for onnxruntime) and its initializer has shape [1].
  symbolic: `backend: "onnxruntime" max_batch_size: 0
    input [ ${f32('A', '[ -1 ]')}, ${f32('B', '[ -1 ]', true)} ] output [ ${f32('Y', '[ -1 ]')} ]`,
  undeclared: `backend: "onnxruntime" max_batch_size: 0 input [ ${f32('A', '[ 2 ]')} ] output [ ${f32('Y', '[ 2 ]')} ]`,
  echo: `backend: "identity" max_batch_size: 4 instance_group [{ count: 1 kind: KIND_CPU }]
    input [ ${f32('INPUT0', '[ 1 ]')}, ${f32('INPUT1', '[ 1 ]', true)} ]
    output [ ${f32('OUTPUT0', '[ 1 ]')}, ${f32('OUTPUT1', '[ 1 ]')} ]
    dynamic_batching { max_queue_delay_microseconds: 200000 }`,
};

interface Reply {
  status: number;
  body: { error?: string; outputs?: { name: string; data: number[] }[] };
}

async function infer(
  url: string,
  model: string,
  inputs: Record<string, number[]>,
  opts: { shape?: number[]; outputs?: string[] } = {},
) {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: Object.entries(inputs).map(([name, data]) => ({
        name,
        shape: opts.shape ?? [data.length],
        datatype: 'FP32',
        data,
      })),
      outputs: opts.outputs?.map((name) => ({ name })),
    }),
  });
  return { status: res.status, body: (await res.json()) as Reply['body'] } satisfies Reply;
}

describe('optional inputs', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;

  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-optional-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
      const graph = name === 'symbolic' ? symbolicOverridableModel() : overridableModel();
      if (config.includes('onnxruntime')) await writeModel(join(repo, name, '1', 'model.onnx'), graph);
    }
    s = await startNereid({ repositories: [repo] });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('an initializer-backed input left out takes the initializer; sent, it overrides it (HTTP)', async () => {
    const without = await infer(s.url, 'with_default', { A: [1, 2] });
    assert.equal(without.status, 200, JSON.stringify(without.body));
    assert.deepEqual(without.body.outputs?.[0].data, [11, 22]);
    const withB = await infer(s.url, 'with_default', { A: [1, 2], B: [100, 200] });
    assert.deepEqual(withB.body.outputs?.[0].data, [101, 202]);
  });

  it('the same over gRPC', async () => {
    type GrpcReply = { raw_output_contents: Buffer[] };
    const a = { name: 'A', datatype: 'FP32', shape: [2] };
    const r1 = await callUnary<GrpcReply>(client, 'ModelInfer', {
      model_name: 'with_default',
      inputs: [a],
      raw_input_contents: [fp32Bytes([5, 6])],
    });
    assert.deepEqual(fp32Of(r1.raw_output_contents[0]), [15, 26]);
    const r2 = await callUnary<GrpcReply>(client, 'ModelInfer', {
      model_name: 'with_default',
      inputs: [a, { name: 'B', datatype: 'FP32', shape: [2] }],
      raw_input_contents: [fp32Bytes([5, 6]), fp32Bytes([-5, -6])],
    });
    assert.deepEqual(fp32Of(r2.raw_output_contents[0]), [0, 0]);
  });

  it("REGRESSION an initializer-backed input with a symbolic dim - loads with the graph input's type (HTTP, gRPC)", async () => {
    // Nereid compared the initializer's shape [1] with the config's [-1] and failed the load.
    const ready = await fetch(`${s.url}/v2/models/symbolic/ready`);
    assert.equal(ready.status, 200);
    const meta = (await (await fetch(`${s.url}/v2/models/symbolic`)).json()) as { inputs: { shape: number[] }[] };
    assert.deepEqual(meta.inputs[1].shape, [-1]);
    const without = await infer(s.url, 'symbolic', { A: [1, 2, 3] });
    assert.equal(without.status, 200, JSON.stringify(without.body));
    assert.deepEqual(without.body.outputs?.[0].data, [11, 12, 13]);
    const withB = await infer(s.url, 'symbolic', { A: [1, 2, 3], B: [1, 1, 1] });
    assert.deepEqual(withB.body.outputs?.[0].data, [2, 3, 4]);
    type GrpcReply = { raw_output_contents: Buffer[] };
    const r = await callUnary<GrpcReply>(client, 'ModelInfer', {
      model_name: 'symbolic',
      inputs: [{ name: 'A', datatype: 'FP32', shape: [2] }],
      raw_input_contents: [fp32Bytes([5, 6])],
    });
    assert.deepEqual(fp32Of(r.raw_output_contents[0]), [15, 16]);
  });

  it('auto-complete leaves initializer-backed inputs out; a config that does not declare them refuses them', async () => {
    const config = (await (await fetch(`${s.url}/v2/models/auto/config`)).json()) as { input: { name: string }[] };
    assert.deepEqual(
      config.input.map((i) => i.name),
      ['A'],
    );
    assert.deepEqual((await infer(s.url, 'auto', { A: [1, 1] })).body.outputs?.[0].data, [11, 21]);
    const r = await infer(s.url, 'undeclared', { A: [1, 1], B: [0, 0] });
    assert.equal(r.status, 400);
    assert.match(r.body.error ?? '', /unexpected inference input 'B' for model 'undeclared'/);
  });

  it('an optional input may be left out; requests with and without it are not batched together', async () => {
    const [withIt, without] = await Promise.all([
      infer(s.url, 'echo', { INPUT0: [1], INPUT1: [2] }, { shape: [1, 1] }),
      infer(s.url, 'echo', { INPUT0: [3] }, { shape: [1, 1], outputs: ['OUTPUT0'] }),
    ]);
    assert.equal(withIt.status, 200, JSON.stringify(withIt.body));
    assert.equal(without.status, 200, JSON.stringify(without.body));
    assert.deepEqual(
      withIt.body.outputs?.map((o) => o.data),
      [[1], [2]],
    );
    assert.deepEqual(
      without.body.outputs?.map((o) => o.data),
      [[3]],
    );
    const stats = (await (await fetch(`${s.url}/v2/models/echo/stats`)).json()) as {
      model_stats: { execution_count: number }[];
    };
    assert.equal(stats.model_stats[0].execution_count, 2);
  });

  it('BAD REQUEST - leaving out a required input still fails, naming it', async () => {
    const r = await infer(s.url, 'echo', { INPUT1: [3] }, { shape: [1, 1] });
    assert.equal(r.status, 400);
    assert.match(r.body.error ?? '', /missing required input\(s\) \['INPUT0'\]/);
  });
});

describe('optional inputs: bad configs', () => {
  it('BAD CONFIG - declaring an input that is neither a graph input nor an initializer fails the load, listing both kinds', async () => {
    const repo = await mkdtemp(join(tmpdir(), 'nereid-optional-bad-'));
    try {
      await mkdir(join(repo, 'bad', '1'), { recursive: true });
      await writeFile(
        join(repo, 'bad', 'config.pbtxt'),
        `backend: "onnxruntime" max_batch_size: 0 input [ ${f32('A', '[ 2 ]')}, ${f32('C', '[ 2 ]', true)} ] output [ ${f32('Y', '[ 2 ]')} ]`,
      );
      await writeModel(join(repo, 'bad', '1', 'model.onnx'), overridableModel());
      await assert.rejects(
        startNereid({ repositories: [repo] }),
        /config\.pbtxt declares input 'C', but the model file's inputs are \['A', 'B'\]/,
      );
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });
});
