import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { InferRequest, InferResponse } from '../../src/core/inference.js';
import { InferenceServer } from '../../src/server/server.js';
import { FakeCudaRuntime } from '../helpers/fake-cudart.js';
import { fakeDeviceBackend, type DeviceExecution } from '../helpers/fake-device-engine.js';

/**
 * Where tensors in client CUDA shared memory go: a GPU instance on the region's device reads and writes them in
 * place (no copy through the host); a CPU instance, a GPU instance on another device, a misaligned slice, and a
 * model whose responses are cached get host copies; device requests never share a batch. Runs the real server
 * (repository, validation, dynamic batcher, in-process transport) against TEST DOUBLES of libcudart
 * (test/helpers/fake-cudart.ts) and of an engine that takes CUDA memory (test/helpers/fake-device-engine.ts);
 * onnxruntime's own device path runs on the H200 (scripts/gpu/cudashm-on-device.sh).
 */

const config = (name: string, group: string, extra = ''): string => `
name: "${name}"
backend: "fakegpu"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
dynamic_batching { max_queue_delay_microseconds: 50000 }
instance_group [ ${group} ]
${extra}
`;

const MODELS: Record<string, string> = {
  gpu1: config('gpu1', '{ kind: KIND_GPU, count: 1, gpus: [ 1 ] }'),
  gpu0: config('gpu0', '{ kind: KIND_GPU, count: 1, gpus: [ 0 ] }'),
  cpu: config('cpu', '{ kind: KIND_CPU, count: 1 }'),
  cached: config('cached', '{ kind: KIND_GPU, count: 1, gpus: [ 1 ] }', 'response_cache { enable: true }'),
};

describe('CUDA shared memory placement (TEST DOUBLES of libcudart and of a device engine)', () => {
  const rt = new FakeCudaRuntime(2);
  const log: DeviceExecution[] = [];
  // Regions on GPU 1: inputs (INPUT0 at 0, INPUT1 at 256, a misaligned INPUT1 at 576), outputs at 0 and 256.
  const input = rt.allocate(1, 1024);
  const output = rt.allocate(1, 512);
  const in0 = Int32Array.from({ length: 16 }, (_, i) => i);
  const in1 = Int32Array.from({ length: 16 }, () => 3);
  let dir: string;
  let server: InferenceServer;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nereid-devroute-'));
    for (const [name, text] of Object.entries(MODELS)) {
      mkdirSync(join(dir, name, '1'), { recursive: true });
      writeFileSync(join(dir, name, 'config.pbtxt'), text);
    }
    input.memory.set(new Uint8Array(in0.buffer), 0);
    input.memory.set(new Uint8Array(in1.buffer), 256);
    input.memory.set(new Uint8Array(in1.buffer), 576);
    server = await InferenceServer.create({
      repositories: [dir],
      backends: [fakeDeviceBackend(rt, log)],
      gpus: [0, 1],
      allowClientShm: true,
      cudaRuntime: () => rt,
      responseCacheBytes: 1 << 20,
    });
    server.registerCudaSharedMemory('in', input.handle, 1n, 1024n);
    server.registerCudaSharedMemory('out', output.handle, 1n, 512n);
  });
  after(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const shm = (region: string, offset: number, byteSize = 64): InferRequest['inputs'][number]['sharedMemory'] => ({
    region,
    offset: BigInt(offset),
    byteSize: BigInt(byteSize),
  });
  const request = (model: string, in1Offset = 256): InferRequest => ({
    model,
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(0), sharedMemory: shm('in', 0) },
      {
        name: 'INPUT1',
        datatype: 'INT32',
        shape: [1, 16],
        data: new Int32Array(0),
        sharedMemory: shm('in', in1Offset),
      },
    ],
    outputs: [
      { name: 'OUTPUT0', sharedMemory: shm('out', 0) },
      { name: 'OUTPUT1', sharedMemory: shm('out', 256) },
    ],
  });
  const results = (): { sum: number[]; diff: number[] } => ({
    sum: [...new Int32Array(output.memory.buffer, output.memory.byteOffset, 16)],
    diff: [...new Int32Array(output.memory.buffer, output.memory.byteOffset + 256, 16)],
  });
  const expected = { sum: [...in0].map((x) => x + 3), diff: [...in0].map((x) => x - 3) };

  async function infer(model: string, in1Offset?: number): Promise<{ response: InferResponse; copies: number }> {
    output.memory.fill(0);
    const before = rt.hostCopies;
    const response = await server.infer(request(model, in1Offset));
    return { response, copies: rt.hostCopies - before };
  }

  it('a GPU instance on the regions’ device reads inputs and writes outputs in place: no host copy', async () => {
    log.length = 0;
    const { response, copies } = await infer('gpu1');
    assert.equal(copies, 0, 'no cudaMemcpy to or from the host');
    assert.deepEqual(log[0].seen, [
      { inputs: { INPUT0: 'cuda:1', INPUT1: 'cuda:1' }, deviceOutputs: ['OUTPUT0', 'OUTPUT1'] },
    ]);
    assert.deepEqual(results(), expected);
    assert.deepEqual(
      response.outputs.map((o) => [o.name, o.shape, o.sharedMemory, o.data.length]),
      [
        ['OUTPUT0', [1, 16], { region: 'out', offset: 0n, byteSize: 64n }, 0],
        ['OUTPUT1', [1, 16], { region: 'out', offset: 256n, byteSize: 64n }, 0],
      ],
    );
  });

  it('a CPU instance gets host copies of the inputs and its host outputs are copied into the region', async () => {
    log.length = 0;
    const { copies } = await infer('cpu');
    assert.equal(copies, 4, 'two inputs device→host, two outputs host→device');
    assert.deepEqual(log[0].seen, [{ inputs: { INPUT0: 'host', INPUT1: 'host' }, deviceOutputs: [] }]);
    assert.deepEqual(results(), expected);
  });

  it('a GPU instance on another device gets host copies too', async () => {
    log.length = 0;
    const { copies } = await infer('gpu0');
    assert.equal(copies, 4);
    assert.deepEqual(log[0].seen, [{ inputs: { INPUT0: 'host', INPUT1: 'host' }, deviceOutputs: [] }]);
    assert.deepEqual(results(), expected);
  });

  it('a slice not aligned to 256 bytes is copied through the host; the aligned ones stay on the device', async () => {
    log.length = 0;
    const { copies } = await infer('gpu1', 576);
    assert.equal(copies, 1, 'only the misaligned input');
    assert.deepEqual(log[0].seen[0].inputs, { INPUT0: 'cuda:1', INPUT1: 'host' });
    assert.deepEqual(results(), expected);
  });

  it('a model with a response cache gets host data (its key hashes the inputs)', async () => {
    log.length = 0;
    const first = await infer('cached');
    assert.equal(first.copies, 4);
    assert.deepEqual(log[0].seen, [{ inputs: { INPUT0: 'host', INPUT1: 'host' }, deviceOutputs: [] }]);
    const second = await infer('cached');
    assert.equal(log.length, 1, 'answered from the cache');
    assert.equal(second.copies, 4, 'inputs read for the key, outputs written from the cache');
    assert.deepEqual(results(), expected);
  });

  it('requests with device tensors never share a batch; host requests still batch', async () => {
    log.length = 0;
    const host = (): InferRequest => ({
      model: 'gpu1',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: in0.slice() },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: in1.slice() },
      ],
    });
    const device = (): InferRequest => ({ ...request('gpu1'), outputs: undefined });
    const all = await Promise.all([device(), host(), device(), host(), host(), device()].map((r) => server.infer(r)));
    for (const r of all) assert.deepEqual([...(r.outputs[0].data as Int32Array)], expected.sum);
    const deviceRuns = log.filter((e) => e.seen.some((s) => Object.values(s.inputs).includes('cuda:1')));
    assert.equal(deviceRuns.length, 3);
    assert.ok(
      deviceRuns.every((e) => e.requests === 1),
      JSON.stringify(log),
    );
    assert.ok(
      log.some((e) => e.requests > 1),
      `host requests were batched: ${JSON.stringify(log.map((e) => e.requests))}`,
    );
  });

  it('BAD CALL - a device input whose slice does not match its shape is refused before anything runs', async () => {
    log.length = 0;
    const r = request('gpu1');
    r.inputs[0] = { ...r.inputs[0], sharedMemory: shm('in', 0, 60) };
    await assert.rejects(
      server.infer(r),
      /input byte size mismatch for input 'INPUT0' for model 'gpu1'. Expected 64, got 60/,
    );
    assert.equal(log.length, 0);
  });
});
