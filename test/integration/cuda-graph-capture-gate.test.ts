/**
 * Issue 31's fault found on the H200: a repository with a CUDA-graph onnxruntime model (graphs captured at load)
 * and other KIND_GPU models failed to start — another model's load made a synchronous CUDA call while the first
 * captured, CUDA answered error 900 "operation not permitted when stream is capturing", that load failed for good
 * and the server exited. Runs the real server (repository, onnxruntime backend: descriptor, transport choice,
 * device gate) against a TEST DOUBLE of the onnxruntime engine on a GPU that captures in CUDA's global mode
 * (test/helpers/fake-capture-engine.ts); the H200 run loads the GPU benchmark's model set together.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { onnxruntimeBackend } from '../../src/backends/onnxruntime/backend.js';
import { InferenceServer } from '../../src/server/server.js';
import { FakeCaptureGpu, fakeCaptureEngines } from '../helpers/fake-capture-engine.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { EXAMPLES } from '../helpers/server.js';

const GPU = 'instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]\n';
const GRAPHS = `optimization { execution_accelerators { gpu_execution_accelerator: [ {
  name: "cuda"
  parameters { key: "enable_cuda_graph" value: "1" }
} ] } }
`;

function repository(models: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'nereid-capture-gate-'));
  const base = readFileSync(join(EXAMPLES, 'simple', 'config.pbtxt'), 'utf8');
  for (const [name, extra] of Object.entries(models)) {
    cpSync(join(EXAMPLES, 'simple', '1'), join(root, name, '1'), { recursive: true });
    writeFileSync(join(root, name, 'config.pbtxt'), base.replace('name: "simple"', `name: "${name}"`) + extra);
  }
  return root;
}

const request = (model: string): Parameters<InferenceServer['infer']>[0] => ({
  model,
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(5) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) },
  ],
});

describe('CUDA graph captures at load and other KIND_GPU loads on one GPU (TEST DOUBLE of the engine)', () => {
  const dirs: string[] = [];
  after(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('a CUDA-graph model and two other KIND_GPU models load together: the capture runs alone, nothing fails', async () => {
    const gpu = new FakeCaptureGpu();
    const root = repository({ graphs: GPU + GRAPHS, plain_a: GPU, plain_b: GPU });
    dirs.push(root);
    const server = await InferenceServer.create({
      repositories: [root],
      backends: [onnxruntimeBackend({ engines: fakeCaptureEngines(gpu) })],
      gpus: [0],
      modelLoadThreadCount: 4,
    });
    try {
      assert.deepEqual(gpu.collisions, [], 'no synchronous CUDA call met a capture');
      assert.equal(gpu.events.filter((e) => e.startsWith('capture:')).length, 1);
      assert.equal(gpu.events.filter((e) => e.startsWith('sync:')).length, 2);
      for (const model of ['graphs', 'plain_a', 'plain_b']) {
        const res = await server.infer(request(model));
        assert.deepEqual([...(res.outputs[0].data as Int32Array)], Array(16).fill(7), model);
      }
    } finally {
      await server.close();
    }
  });

  it('a load that meets a capture the gate cannot see is retried with a warning, never failed', async () => {
    const gpu = new FakeCaptureGpu(0);
    gpu.outsideCaptures = 2;
    const root = repository({ plain: GPU });
    dirs.push(root);
    const logger = recordingLogger();
    const server = await InferenceServer.create({
      repositories: [root],
      backends: [onnxruntimeBackend({ engines: fakeCaptureEngines(gpu) })],
      gpus: [0],
      logger,
    });
    try {
      assert.deepEqual(gpu.collisions, ['sync:plain', 'sync:plain']);
      const retries = logger.entries.filter((e) => e.level === 'warn' && /capture.*retrying/.test(e.msg));
      assert.equal(retries.length, 2, JSON.stringify(retries));
      assert.match(retries[0].msg, /stream is capturing/);
      const res = await server.infer(request('plain'));
      assert.deepEqual([...(res.outputs[1].data as Int32Array)], Array(16).fill(3));
    } finally {
      await server.close();
    }
  });

  it('a run of another KIND_GPU model waits while a model loaded later captures, then runs', async () => {
    const gpu = new FakeCaptureGpu();
    const root = repository({ graphs: GPU + GRAPHS, plain: GPU });
    dirs.push(root);
    const server = await InferenceServer.create({
      repositories: [root],
      backends: [onnxruntimeBackend({ engines: fakeCaptureEngines(gpu) })],
      gpus: [0],
      modelControlMode: 'explicit',
      loadModels: ['plain'],
    });
    try {
      const loading = server.loadModel('graphs');
      await gpu.captureBegun;
      const res = await server.infer(request('plain'));
      await loading;
      assert.deepEqual([...(res.outputs[0].data as Int32Array)], Array(16).fill(7));
      assert.deepEqual(gpu.collisions, [], 'the run made no CUDA call during the capture');
      assert.deepEqual(
        gpu.events.filter((e) => e !== 'sync:plain'),
        ['capture:graphs', 'run:plain'],
        'the run came after the capture',
      );
    } finally {
      await server.close();
    }
  });
});
