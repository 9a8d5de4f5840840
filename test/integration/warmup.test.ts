import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type * as grpc from '@grpc/grpc-js';
import { embeddingModel, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Model warm-up on a real server in explicit mode, loads asked over HTTP and gRPC: samples run on every instance
 * before the model is READY (not counted in its statistics); zero, random and file data reach the engine; a
 * failing sample or a missing data file fails the load naming it.
 */

const EMBED_IO = `backend: "onnxruntime" max_batch_size: 4
  input [{ name: "IDX" data_type: TYPE_INT64 dims: [ 1 ] }]
  output [{ name: "Y" data_type: TYPE_FP32 dims: [ 1, 2 ] }]
  instance_group [{ count: 2 kind: KIND_CPU }]`;
const sample = (name: string, data: string, extra = '') =>
  `model_warmup [{ name: "${name}" batch_size: 2 ${extra}
     inputs { key: "IDX" value { data_type: TYPE_INT64 dims: [ 1 ] ${data} } } }]`;

const MODELS: Record<string, string> = {
  // 300 ms per execution, three iterations per instance: the load takes at least 0.9 s.
  slow: `backend: "identity" max_batch_size: 2
    input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }] output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }]
    instance_group [{ count: 1 kind: KIND_CPU }]
    parameters { key: "execute_delay_ms" value { string_value: "300" } }
    model_warmup [{ name: "three_times" batch_size: 2 count: 3
      inputs { key: "INPUT0" value { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } }]`,
  zeros: `${EMBED_IO} ${sample('zeros', 'zero_data: true')}`,
  from_file: `${EMBED_IO} ${sample('index_three', 'input_data_file: "three.bin"')}`,
  // Random int64 indices are out of the table's range: the engine refuses them.
  random: `${EMBED_IO} ${sample('random_indices', 'random_data: true')}`,
  bad_file: `${EMBED_IO} ${sample('index_nine', 'input_data_file: "nine.bin"')}`,
  no_file: `${EMBED_IO} ${sample('gone', 'input_data_file: "missing.bin"')}`,
  short_file: `${EMBED_IO} ${sample('short', 'input_data_file: "short.bin"')}`,
  variable_dims: `${EMBED_IO} ${sample('var', 'zero_data: true').replace('dims: [ 1 ] zero', 'dims: [ -1 ] zero')}`,
  unknown_input: `${EMBED_IO} ${sample('unknown', 'zero_data: true').replace('key: "IDX"', 'key: "NOPE"')}`,
};

describe('model warm-up', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;
  const post = async (path: string) => {
    const r = await fetch(`${s.url}${path}`, { method: 'POST', body: '{}' });
    return { status: r.status, body: (await r.json().catch(() => ({}))) as { error?: string } };
  };

  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-warmup-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await mkdir(join(repo, name, 'warmup'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
      if (config.includes('onnxruntime')) await writeModel(join(repo, name, '1', 'model.onnx'), embeddingModel());
    }
    await writeFile(join(repo, 'from_file', 'warmup', 'three.bin'), Buffer.from(BigInt64Array.of(3n).buffer));
    await writeFile(join(repo, 'bad_file', 'warmup', 'nine.bin'), Buffer.from(BigInt64Array.of(9n).buffer));
    await writeFile(join(repo, 'short_file', 'warmup', 'short.bin'), Buffer.from([1, 2, 3]));
    s = await startNereid({ repositories: [repo], modelControlMode: 'explicit' });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('runs every sample count times before READY, and does not count it in the statistics', async () => {
    let readyDuringLoad: number | undefined;
    const t0 = performance.now();
    const loading = post('/v2/repository/models/slow/load');
    setTimeout(() => {
      void fetch(`${s.url}/v2/models/slow/ready`).then((r) => (readyDuringLoad = r.status));
    }, 300);
    assert.equal((await loading).status, 200);
    const ms = performance.now() - t0;
    assert.ok(ms >= 850, `load took ${ms.toFixed(0)} ms; three 300 ms warm-up runs must come first`);
    assert.equal(readyDuringLoad, 400);
    const stats = (await (await fetch(`${s.url}/v2/models/slow/stats`)).json()) as {
      model_stats: { execution_count: number; inference_count: number }[];
    };
    assert.deepEqual([stats.model_stats[0].execution_count, stats.model_stats[0].inference_count], [0, 0]);
  });

  it('loads with zero data and with data from warmup/<file> (HTTP and gRPC)', async () => {
    assert.equal((await post('/v2/repository/models/zeros/load')).status, 200);
    await callUnary(client, 'RepositoryModelLoad', { model_name: 'from_file' });
    const r = await fetch(`${s.url}/v2/models/from_file/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'IDX', shape: [1, 1], datatype: 'INT64', data: [2] }] }),
    });
    assert.deepEqual(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0].data, [20, 21]);
  });

  it('BAD CONFIG - a sample the engine refuses fails the load, naming the sample (HTTP)', async () => {
    for (const [model, name] of [
      ['random', 'random_indices'],
      ['bad_file', 'index_nine'],
    ]) {
      const r = await post(`/v2/repository/models/${model}/load`);
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.match(r.body.error ?? '', new RegExp(`failed to run warmup sample '${name}': onnxruntime: .*`));
      assert.equal((await fetch(`${s.url}/v2/models/${model}/ready`)).status, 400);
    }
  });

  it('BAD CONFIG - a missing or short data file, a variable dim and an unknown input fail the load (gRPC)', async () => {
    const cases: [string, RegExp][] = [
      ['no_file', /model_warmup sample 'gone': input 'IDX': cannot read .*warmup\/missing\.bin: no such file/],
      ['short_file', /warmup setting expects 8 bytes, but the data provided from short\.bin only has 3 bytes/],
      ['variable_dims', /warmup setting expects all variable-size dimensions are specified for input 'IDX'/],
      ['unknown_input', /model_warmup sample 'unknown': 'NOPE' is not an input of model 'unknown_input'/],
    ];
    for (const [model, message] of cases) {
      await assert.rejects(
        callUnary(client, 'RepositoryModelLoad', { model_name: model }),
        (e: grpc.ServiceError) => e.code === 3 && message.test(e.details),
        model,
      );
    }
  });
});
