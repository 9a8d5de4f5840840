import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { foldableModel, matmulModel, readNodeOps, writeModel } from '../../../test/fixtures/onnx-builder.js';
import type { ModelConfig } from '../../config/model-config.js';
import { InferenceSession } from 'onnxruntime-node';
import { executeOne, loadForTest } from '../../../test/helpers/engine.js';
import type { BackendConfig } from '../contract.js';
import { onnxruntimeBackend } from './backend.js';
import { sessionOptionsFor } from './options.js';

/**
 * Options observed in onnxruntime itself, not only in our mapping: the graph level through the optimized
 * graph ORT writes, thread counts through the threads the process gains while a session is loaded.
 */

const backend = onnxruntimeBackend();
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-ort-obs-'));
  await writeModel(join(dir, 'fold.onnx'), foldableModel());
  await writeModel(join(dir, 'matmul.onnx'), matmulModel(64));
});
after(() => rm(dir, { recursive: true, force: true }));

/** Node count of the graph ORT optimized with the session options mapped from `config`. */
async function optimizedNodes(config: ModelConfig, tag: string): Promise<string[]> {
  const out = join(dir, `opt-${tag}.onnx`);
  // The mapped options straight into onnxruntime-node (here, in the test's thread): ORT writes the graph it
  // optimized with them.
  const { session } = sessionOptionsFor(config);
  const s = await InferenceSession.create(join(dir, 'fold.onnx'), {
    ...(session as InferenceSession.SessionOptions),
    optimizedModelFilePath: out,
    logSeverityLevel: 3,
  });
  await s.release();
  return readNodeOps(out);
}

const threads = (): number => readdirSync('/proc/self/task').length;

/** Threads the process gains while a one-instance model loaded with `config` is up. */
async function threadsAdded(config: ModelConfig, backendConfig: BackendConfig = {}): Promise<number> {
  const before = threads();
  const model = await loadForTest(backend, {
    name: 'mm',
    config,
    modelDir: dir,
    modelPath: join(dir, 'matmul.onnx'),
    backendConfig,
  });
  try {
    const x = new Float32Array(256 * 64).fill(1);
    await executeOne(model.instances[0], {
      inputs: [{ name: 'X', datatype: 'FP32', shape: [256, 64], data: x }],
      outputs: ['Y'],
    });
    return threads() - before;
  } finally {
    await model.close();
    // Let the worker's threads go before the next measurement.
    for (let i = 0; i < 50 && threads() > before; i++) await new Promise((r) => setTimeout(r, 10));
  }
}

const p = (entries: Record<string, string>): ModelConfig => ({
  parameters: Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, { string_value: v }])),
});

describe('onnxruntime options as observed in onnxruntime', { skip: process.platform !== 'linux' }, () => {
  it('graph level 2 keeps the constant chain; default and -1 fold it', async () => {
    assert.deepEqual(await optimizedNodes({ optimization: { graph: { level: 2 } } }, 'disabled'), ['Add', 'Add']);
    assert.deepEqual(await optimizedNodes({ optimization: { graph: { level: -1 } } }, 'basic'), ['Add']);
    assert.deepEqual(await optimizedNodes({ optimization: { graph: { level: 1 } } }, 'extended'), ['Add']);
    assert.deepEqual(await optimizedNodes({}, 'all'), ['Add']);
  });

  it('intra_op_thread_count sets the size of the session thread pool', async () => {
    await threadsAdded(p({ intra_op_thread_count: '1' })); // warm-up: lazily started Node/V8 threads
    const one = await threadsAdded(p({ intra_op_thread_count: '1' }));
    const five = await threadsAdded(p({ intra_op_thread_count: '5' }));
    // ORT's pool of n has n - 1 threads (the caller is the n-th).
    assert.equal(five - one, 4, `intra=1 added ${one} threads, intra=5 added ${five}`);
  });

  it('inter_op_thread_count applies in parallel execution mode', async () => {
    const seq = await threadsAdded(p({ intra_op_thread_count: '1', execution_mode: '0', inter_op_thread_count: '4' }));
    const par = await threadsAdded(p({ intra_op_thread_count: '1', execution_mode: '1', inter_op_thread_count: '4' }));
    assert.equal(par - seq, 3, `sequential added ${seq} threads, parallel with inter=4 added ${par}`);
  });

  it('with the global thread pool on, backend-config counts replace the model counts', async () => {
    const model = await threadsAdded(p({ intra_op_thread_count: '1' }));
    const global = await threadsAdded(p({ intra_op_thread_count: '1' }), {
      'enable-global-threadpool': '1',
      intra_op_thread_count: '4',
    });
    assert.equal(global - model, 3, `model intra=1 added ${model} threads, backend-config intra=4 added ${global}`);
  });
});
