import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pythonBackend } from '../../src/backends/python/index.js';
import { forceCpuOnlyInputs } from '../../src/backends/python/options.js';
import type { InferRequest } from '../../src/core/inference.js';
import { InferenceServer } from '../../src/server/server.js';
import { SharedFakeCudaRuntime } from '../helpers/fake-cudart-shared.js';

/**
 * Client CUDA shared memory and the process transport: a python KIND_GPU instance that asked for GPU inputs
 * (FORCE_CPU_ONLY_INPUT_TENSORS "no") on the regions' device gets IPC handle descriptors, opens the regions in its
 * own process and reads and writes them in place — the server makes no host copy; a KIND_CPU instance, a KIND_GPU
 * one with Triton's default (CPU-only inputs) and one on another GPU get host copies. When the client unregisters
 * a region the child closes its mapping. Runs the real server and a real python stub against TEST DOUBLES of CUDA
 * on both sides, sharing "device memory" through /dev/shm (test/helpers/fake-cudart-shared.ts in the server,
 * test/fixtures/cuda/fake_cudart.py in the child); the real path runs on the H200 (scripts/gpu/cudashm-on-device.sh).
 */

const FIXTURES = fileURLToPath(new URL('../fixtures/cuda/', import.meta.url));

const config = (name: string, group: string, params: Record<string, string>): string => `
name: "${name}"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
instance_group [ ${group} ]
parameters [ ${Object.entries(params)
  .map(([k, v]) => `{ key: "${k}" value: { string_value: "${v}" } }`)
  .join(', ')} ]
`;

const MODELS: Record<string, string> = {
  py_gpu: config('py_gpu', '{ kind: KIND_GPU, count: 1, gpus: [ 1 ] }', {
    FORCE_CPU_ONLY_INPUT_TENSORS: 'no',
    EXPECT: 'device',
  }),
  py_gpu_default: config('py_gpu_default', '{ kind: KIND_GPU, count: 1, gpus: [ 1 ] }', { EXPECT: 'host' }),
  py_gpu_other: config('py_gpu_other', '{ kind: KIND_GPU, count: 1, gpus: [ 0 ] }', {
    FORCE_CPU_ONLY_INPUT_TENSORS: 'no',
    EXPECT: 'host',
  }),
  py_cpu: config('py_cpu', '{ kind: KIND_CPU, count: 1 }', { FORCE_CPU_ONLY_INPUT_TENSORS: 'no', EXPECT: 'host' }),
};

describe('CUDA shared memory through the process transport (TEST DOUBLES of CUDA in the server and the child)', () => {
  const rt = new SharedFakeCudaRuntime(2);
  const input = rt.allocate(1, 1024);
  const output = rt.allocate(1, 512);
  const in0 = Int32Array.from({ length: 16 }, (_, i) => i);
  const in1 = Int32Array.from({ length: 16 }, () => 3);
  const expected = { sum: [...in0].map((x) => x + 3), diff: [...in0].map((x) => x - 3) };
  let dir: string;
  let log: string;
  let server: InferenceServer;
  const saved = { ...process.env };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nereid-cudaproc-'));
    log = join(dir, 'fake-cuda.log');
    for (const [name, text] of Object.entries(MODELS)) {
      mkdirSync(join(dir, name, '1'), { recursive: true });
      writeFileSync(join(dir, name, 'config.pbtxt'), text);
      cpSync(join(FIXTURES, 'add_sub_dlpack', 'model.py'), join(dir, name, '1', 'model.py'));
    }
    input.write(0, new Uint8Array(in0.buffer));
    input.write(256, new Uint8Array(in1.buffer));
    // The stubs inherit the environment: their CUDA runtime is the child-side test double.
    process.env.NEREID_CUDA_RUNTIME_TEST_DOUBLE = join(FIXTURES, 'fake_cudart.py');
    process.env.NEREID_FAKE_CUDA_LOG = log;
    server = await InferenceServer.create({
      repositories: [dir],
      backends: [pythonBackend()],
      gpus: [0, 1],
      allowClientShm: true,
      cudaRuntime: () => rt,
    });
    server.registerCudaSharedMemory('in', input.handle, 1n, 1024n);
    server.registerCudaSharedMemory('out', output.handle, 1n, 512n);
  });
  after(async () => {
    await server.close();
    rt.dispose();
    rmSync(dir, { recursive: true, force: true });
    process.env = saved;
  });

  const shm = (region: string, offset: number, byteSize = 64) => ({
    region,
    offset: BigInt(offset),
    byteSize: BigInt(byteSize),
  });
  const request = (model: string): InferRequest => ({
    model,
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(0), sharedMemory: shm('in', 0) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(0), sharedMemory: shm('in', 256) },
    ],
    outputs: [
      { name: 'OUTPUT0', sharedMemory: shm('out', 0) },
      { name: 'OUTPUT1', sharedMemory: shm('out', 256) },
    ],
  });
  const results = (): { sum: number[]; diff: number[] } => {
    const a = output.read(0, 512);
    return {
      sum: [...new Int32Array(a.buffer, a.byteOffset, 16)],
      diff: [...new Int32Array(a.buffer, a.byteOffset + 256, 16)],
    };
  };
  const opens = (): string[] => (existsSync(log) ? readFileSync(log, 'utf8').trim().split('\n') : []);

  async function infer(model: string): Promise<number> {
    output.write(0, new Uint8Array(512));
    const before = rt.hostCopies;
    const response = await server.infer(request(model));
    assert.deepEqual(
      response.outputs.map((o) => [o.name, o.sharedMemory, o.data.length]),
      [
        ['OUTPUT0', { region: 'out', offset: 0n, byteSize: 64n }, 0],
        ['OUTPUT1', { region: 'out', offset: 256n, byteSize: 64n }, 0],
      ],
    );
    assert.deepEqual(results(), expected);
    return rt.hostCopies - before;
  }

  it('a python KIND_GPU instance that takes GPU inputs reads and writes the regions in its own process: no host copy', async () => {
    assert.equal(await infer('py_gpu'), 0, 'no cudaMemcpy to or from the host in the server');
    assert.equal(await infer('py_gpu'), 0);
    const lines = opens();
    assert.equal(lines.filter((l) => l.startsWith('open ')).length, 2, `each region opened once: ${lines.join('; ')}`);
    assert.ok(lines.every((l) => l.endsWith('cuda:1')));
  });

  it("a KIND_GPU instance with Triton's default FORCE_CPU_ONLY_INPUT_TENSORS gets host copies", async () => {
    assert.equal(await infer('py_gpu_default'), 4, 'two inputs device→host, two outputs host→device');
  });

  it('a KIND_GPU instance on another GPU, and a KIND_CPU one, get host copies', async () => {
    assert.equal(await infer('py_gpu_other'), 4);
    assert.equal(await infer('py_cpu'), 4);
  });

  it('unregistering a region closes its mapping in the child; a region registered again is opened anew', async () => {
    server.unregisterCudaSharedMemory('out');
    for (let i = 0; i < 50 && !opens().some((l) => l.startsWith('close ')); i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(opens().filter((l) => l.startsWith('close ')).length, 1, opens().join('; '));
    server.registerCudaSharedMemory('out', output.handle, 1n, 512n);
    assert.equal(await infer('py_gpu'), 0);
    assert.equal(opens().filter((l) => l.startsWith('open ')).length, 3);
  });

  it('BAD CONFIG - FORCE_CPU_ONLY_INPUT_TENSORS other than yes/no fails the load', () => {
    const parameters = { FORCE_CPU_ONLY_INPUT_TENSORS: { string_value: 'maybe' } };
    assert.throws(
      () => forceCpuOnlyInputs({ name: 'm', parameters }),
      /model 'm': parameter FORCE_CPU_ONLY_INPUT_TENSORS is 'maybe'; expected 'yes' or 'no'/,
    );
    assert.equal(forceCpuOnlyInputs({ name: 'm' }), true, "Triton's default: CPU inputs");
    assert.equal(
      forceCpuOnlyInputs({ name: 'm', parameters: { FORCE_CPU_ONLY_INPUT_TENSORS: { string_value: 'NO' } } }),
      false,
    );
  });
});
