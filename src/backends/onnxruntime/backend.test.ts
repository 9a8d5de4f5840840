import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addSubModel, ELEM, matmulModel, writeModel } from '../../../test/fixtures/onnx-builder.js';
import type { ModelConfig } from '../../config/model-config.js';
import { CancelledError, InternalError, InvalidArgError } from '../../core/errors.js';
import { noopLogger } from '../../core/logger.js';
import type { Tensor } from '../../core/tensor.js';
import { executeOne, loadForTest, type LoadedForTest } from '../../../test/helpers/engine.js';
import type { Instance } from '../contract.js';
import { onnxruntimeBackend } from './backend.js';

const backend = onnxruntimeBackend();
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-ort-'));
  await writeModel(join(dir, 'simple.onnx'), addSubModel());
  await mkdir(join(dir, 'dirmodel', 'model.onnx'), { recursive: true });
  await writeModel(join(dir, 'dirmodel', 'model.onnx', 'model.onnx'), addSubModel(ELEM.FLOAT, [null, 4]));
  await writeModel(join(dir, 'matmul.onnx'), matmulModel(512));
});
after(() => rm(dir, { recursive: true, force: true }));

const load = (file: string, config: ModelConfig = {}): Promise<LoadedForTest> =>
  loadForTest(backend, {
    config,
    modelDir: dir,
    modelPath: join(dir, file),
    instances: (config.instance_group ?? []).reduce((n, g) => n + (g.count ?? 1), 0) || 1,
  });

/** The auto-completed config of a model file with no config.pbtxt. */
const complete = (path: string): Promise<ModelConfig> =>
  backend.autoComplete(
    {},
    { modelName: 'm', modelPath: path, backendConfig: {}, autoComplete: true, logger: noopLogger },
  );

const int32 = (name: string, shape: number[], f: (i: number) => number): Tensor => ({
  name,
  datatype: 'INT32',
  shape,
  data: Int32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => f(i)),
});

describe('onnxruntime backend', () => {
  it('names itself as Triton does', () => {
    assert.equal(backend.name, 'onnxruntime');
    assert.deepEqual(backend.platforms, ['onnxruntime_onnx']);
    assert.equal(backend.defaultModelFilename, 'model.onnx');
  });

  it('auto-completes inputs and outputs from the model, dynamic first dims making it batch', async () => {
    const c = await complete(join(dir, 'simple.onnx'));
    assert.equal(c.max_batch_size, 4);
    assert.deepEqual(c.input, [
      { name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] },
      { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] },
    ]);
    assert.deepEqual(
      c.output?.map((o) => o.name),
      ['OUTPUT0', 'OUTPUT1'],
    );
  });

  it('reads a model stored as a directory model.onnx/model.onnx (unknown dims are -1 too)', async () => {
    const c = await complete(join(dir, 'dirmodel', 'model.onnx'));
    assert.deepEqual(c.input?.[0], { name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] });
  });

  it('executes add/sub and returns only the requested outputs, in the requested order', async () => {
    const model = await load('simple.onnx');
    try {
      const r = await executeOne(model.instances[0], {
        inputs: [int32('INPUT0', [2, 16], (i) => i), int32('INPUT1', [2, 16], () => 1)],
        outputs: ['OUTPUT1'],
      });
      assert.equal(r.outputs.length, 1);
      assert.equal(r.outputs[0].name, 'OUTPUT1');
      assert.deepEqual(r.outputs[0].shape, [2, 16]);
      assert.deepEqual(Array.from(r.outputs[0].data as Int32Array).slice(0, 3), [-1, 0, 1]);
      for (const t of [r.timings.computeInputNs, r.timings.computeInferNs, r.timings.computeOutputNs]) {
        assert.ok(Number.isInteger(t) && t > 0);
      }
      const both = await executeOne(model.instances[0], {
        inputs: [int32('INPUT0', [1, 16], () => 5), int32('INPUT1', [1, 16], () => 2)],
        outputs: ['OUTPUT1', 'OUTPUT0'],
      });
      assert.deepEqual(
        both.outputs.map((o) => [o.name, (o.data as Int32Array)[0]]),
        [
          ['OUTPUT1', 3],
          ['OUTPUT0', 7],
        ],
      );
    } finally {
      await model.close();
    }
  });

  it('copies inputs that are views into a larger buffer and leaves that buffer intact', async () => {
    const model = await load('simple.onnx');
    try {
      const body = new Int32Array(40).fill(4);
      const input: Tensor = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: body.subarray(4, 20) };
      const r = await executeOne(model.instances[0], {
        inputs: [input, { ...input, name: 'INPUT1' }],
        outputs: ['OUTPUT0'],
      });
      assert.equal((r.outputs[0].data as Int32Array)[0], 8);
      assert.equal(body.length, 40, 'the shared buffer was not detached');
    } finally {
      await model.close();
    }
  });

  it('BAD INPUT - a shape ORT rejects is a clean INVALID_ARG with its message', async () => {
    const model = await load('simple.onnx');
    try {
      await assert.rejects(
        executeOne(model.instances[0], {
          inputs: [int32('INPUT0', [2, 15], () => 0), int32('INPUT1', [2, 16], () => 0)],
          outputs: ['OUTPUT0'],
        }),
        (e: unknown) => e instanceof InvalidArgError && /INPUT0/.test(e.message) && /onnxruntime/.test(e.message),
      );
      // The instance is still usable afterwards.
      const r = await executeOne(model.instances[0], {
        inputs: [int32('INPUT0', [1, 16], () => 1), int32('INPUT1', [1, 16], () => 1)],
        outputs: ['OUTPUT0'],
      });
      assert.equal((r.outputs[0].data as Int32Array)[0], 2);
    } finally {
      await model.close();
    }
  });

  it('CANCEL - an execution aborted before it is posted rejects with CANCELLED', async () => {
    const model = await load('simple.onnx');
    try {
      const ac = new AbortController();
      ac.abort();
      await assert.rejects(
        executeOne(model.instances[0], { inputs: [], outputs: ['OUTPUT0'] }, ac.signal),
        CancelledError,
      );
    } finally {
      await model.close();
    }
  });

  it('close is idempotent, and execute after close is refused', async () => {
    const model = await load('simple.onnx', { instance_group: [{ kind: 'KIND_CPU', count: 2 }] });
    await Promise.all([model.close(), model.close()]);
    await model.close();
    await assert.rejects(executeOne(model.instances[0], { inputs: [], outputs: [] }));
  });

  it('loads and runs with every onnxruntime-backend model parameter set (ORT accepts the mapped options)', async () => {
    const parameters = Object.fromEntries(
      Object.entries({
        intra_op_thread_count: '2',
        inter_op_thread_count: '2',
        execution_mode: '1',
        enable_mem_arena: '1',
        enable_mem_pattern: '0',
        'memory.enable_memory_arena_shrinkage': 'cpu:0',
        'session.use_device_allocator_for_initializers': '1',
        cudnn_conv_algo_search: '0',
        gpu_mem_limit: '4294967200',
        arena_extend_strategy: '1',
        do_copy_in_default_stream: '1',
      }).map(([k, v]) => [k, { string_value: v }]),
    );
    const warnings: string[] = [];
    const logger = { ...noopLogger, warn: (m: object | string) => void warnings.push(String(m)), child: () => logger };
    const config: ModelConfig = { parameters, optimization: { graph: { level: 1 } } };
    const modelPath = join(dir, 'dirmodel', 'model.onnx');
    const handle = await backend.load({
      name: 'm',
      version: 1,
      config,
      modelDir: dir,
      modelPath,
      backendConfig: {},
      logLevel: 'silent',
      logger,
    });
    const model = {
      instances: [await handle.createInstance({ name: 'm_0', index: 0, kind: 'KIND_CPU', device: -1, profiles: [] })],
      close: async () => {
        await model.instances[0].destroy();
      },
    };
    try {
      const x: Tensor = { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: Float32Array.of(1, 2, 3, 4) };
      const r = await executeOne(model.instances[0], { inputs: [x, { ...x, name: 'INPUT1' }], outputs: ['OUTPUT0'] });
      assert.deepEqual(Array.from(r.outputs[0].data as Float32Array), [2, 4, 6, 8]);
      assert.equal(warnings.length, 5, warnings.join('\n'));
    } finally {
      await model.close();
    }
  });

  it('BAD CONFIG - accelerators this build cannot honour fail the load', async () => {
    await assert.rejects(
      load('simple.onnx', {
        optimization: { execution_accelerators: { cpu_execution_accelerator: [{ name: 'openvino' }] } },
      }),
      /execution accelerator 'openvino' is not available in this build/,
    );
  });

  it('BAD MODEL - a file that is not ONNX is a load error, not a crash', async () => {
    await writeModel(join(dir, 'bad.onnx'), {
      inputs: [],
      outputs: [],
      nodes: [{ op: 'NoSuchOp', inputs: [], outputs: ['y'] }],
    });
    await assert.rejects(
      load('bad.onnx'),
      (e: unknown) => e instanceof InvalidArgError && /onnxruntime/.test(e.message),
    );
  });

  it('two instances run in parallel on two worker threads without blocking the event loop', async () => {
    const config: ModelConfig = {
      instance_group: [{ kind: 'KIND_CPU', count: 2 }],
      parameters: { intra_op_thread_count: { string_value: '1' } },
    };
    const model = await load('matmul.onnx', config);
    const input = (rows: number): Tensor => ({
      name: 'X',
      datatype: 'FP32',
      shape: [rows, 512],
      data: new Float32Array(rows * 512).fill(0.5),
    });
    const run = (i: number, x: Tensor) => executeOne(model.instances[i], { inputs: [x], outputs: ['Y'] });
    try {
      await Promise.all([run(0, input(1)), run(1, input(1))]); // warm-up
      const [big, small] = [input(8192), input(1)];
      let maxGap = 0;
      let last = performance.now();
      const ticker = setInterval(() => {
        const now = performance.now();
        maxGap = Math.max(maxGap, now - last);
        last = now;
      }, 1);
      // A long run on instance 0 and a tiny one on instance 1, posted right after: on two threads the tiny one
      // finishes first; on one thread it would wait for the long one. (A wall-clock speed-up is not a robust
      // check on a 2-vCPU CI box.)
      const order: number[] = [];
      const long = run(0, big).then((r) => (order.push(0), r));
      const short = run(1, small).then((r) => (order.push(1), r));
      const [l] = await Promise.all([long, short]);
      clearInterval(ticker);
      const inferMs = l.timings.computeInferNs / 1e6;
      assert.deepEqual(order, [1, 0], `long run took ${inferMs.toFixed(1)} ms`);
      // Had the run been on the main thread, the event loop would have stalled for all of it.
      assert.ok(
        maxGap < inferMs / 2,
        `event loop stalled ${maxGap.toFixed(1)} ms during a ${inferMs.toFixed(1)} ms run`,
      );
    } finally {
      await model.close();
    }
  });

  it('an engine thread crash fails in-flight executions with INTERNAL naming the instance, and settles died', async () => {
    const model = await load('matmul.onnx');
    const instance = model.instances[0] as Instance & { __crash(): void };
    const x: Tensor = { name: 'X', datatype: 'FP32', shape: [1024, 512], data: new Float32Array(1024 * 512) };
    // The thread exits on the fault-injection message, before it reads the run posted after it, so that run
    // is in flight when the thread dies. (terminate() mid-run would abort the process: onnxruntime native code.)
    instance.__crash();
    const inflight = executeOne(instance, { inputs: [x], outputs: ['Y'] });
    await assert.rejects(inflight, (e: unknown) => e instanceof InternalError && /instance m_0 .*died/.test(e.message));
    const died = await instance.died;
    assert.match(died.message, /exited with code 70/);
    await assert.rejects(executeOne(instance, { inputs: [], outputs: ['Y'] }), InternalError);
    await model.close();
  });
});
