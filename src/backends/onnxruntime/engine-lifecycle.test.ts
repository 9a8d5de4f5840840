import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { matmulChainModel } from '../../../test/fixtures/capi-models.js';
import { identityModel, writeModel } from '../../../test/fixtures/onnx-builder.js';
import { Collected, never, open, params, request } from '../../../test/helpers/capi-engine.js';
import { CancelledError, InvalidArgError, UnavailableError, UnsupportedError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { envReferences } from './capi/env.js';
import { onnxruntimeDescriptor } from './descriptor.js';
import { isStickyError } from './errors.js';
import { autoCompleteOnnx, readSignature } from './signature.js';

/**
 * The onnxruntime C API engine, in process: its lifecycle. Reading a model's signature, refusing bad options and
 * GPU requests on a machine without a GPU at load, runs on their own threads (the event loop stays free),
 * cancellation, unload during a run, instances in parallel. What a run answers: engine.test.ts.
 */

const SIMPLE = join(import.meta.dirname, '../../../examples/model_repository/simple/1/model.onnx');
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-capi-life-'));
  await writeModel(join(dir, 'chain.onnx'), matmulChainModel(3000, 128));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
  assert.equal(envReferences(), 0, 'every load released its OrtEnv reference');
});

/** Rows of X that make the 3000-MatMul chain run for hundreds of milliseconds on one thread. */
const LONG = 1024;

describe('onnxruntime C API engine lifecycle', () => {
  it('reads the signature through the C API (symbolic dims as -1) and auto-completes like Triton', async () => {
    const sig = await readSignature(SIMPLE);
    assert.deepEqual(
      sig.inputs.map((t) => [t.name, t.datatype, t.dims]),
      [
        ['INPUT0', 'INT32', [-1, 16]],
        ['INPUT1', 'INT32', [-1, 16]],
      ],
    );
    const { config, warnings } = await autoCompleteOnnx(
      {},
      { modelName: 'simple', modelPath: SIMPLE, backendConfig: { 'default-max-batch-size': '6' }, autoComplete: true },
    );
    assert.equal(config.max_batch_size, 6);
    assert.deepEqual(
      config.input?.map((i) => [i.name, i.data_type, i.dims]),
      [
        ['INPUT0', 'TYPE_INT32', [16]],
        ['INPUT1', 'TYPE_INT32', [16]],
      ],
    );
    assert.ok(config.dynamic_batching);
    assert.match(warnings.join('\n'), /autofilled max_batch_size to 6/);
    await assert.rejects(readSignature(join(dir, 'missing.onnx')), /does not exist/);
    const garbage = join(dir, 'garbage.onnx');
    await writeFile(garbage, 'not a model');
    await assert.rejects(
      readSignature(garbage),
      (e: unknown) => e instanceof InvalidArgError && /could not load/.test(e.message),
    );
  });

  it('BAD MODEL - refuses an instance that was loaded with bad options, naming them', async () => {
    await assert.rejects(
      open(SIMPLE, { parameters: params({ execution_mode: '3' }) }),
      (e: unknown) => e instanceof InvalidArgError && /'execution_mode'/.test(e.message),
    );
  });

  it('works with intra_op_thread_count 1 and never blocks the event loop during a long run', async () => {
    const m = await open(join(dir, 'chain.onnx'), {
      max_batch_size: 0,
      parameters: params({ intra_op_thread_count: '1' }),
    });
    try {
      const x: Tensor = { name: 'X', datatype: 'FP32', shape: [LONG, 128], data: new Float32Array(LONG * 128).fill(1) };
      let ticks = 0;
      let maxGap = 0;
      let last = performance.now();
      const timer = setInterval(() => {
        const now = performance.now();
        maxGap = Math.max(maxGap, now - last);
        last = now;
        ticks++;
      }, 5);
      const t0 = performance.now();
      const r = new Collected();
      await m.instances[0].execute([request([x], ['Y'], 1)], r, never());
      const runMs = performance.now() - t0;
      clearInterval(timer);
      assert.deepEqual(Array.from((r.response(0).outputs[0].data as Float32Array).slice(0, 2)), [1, 1]);
      assert.ok(runMs > 100, `the chain should run a while (ran ${runMs.toFixed(0)} ms)`);
      assert.deepEqual(m.instances[0].runCounts(), { inline: 0, pooled: 1 }, 'a long run is never inline');
      assert.ok(ticks >= runMs / 5 / 4, `timers kept firing: ${ticks} ticks in ${runMs.toFixed(0)} ms`);
      // A ratio of this run (load stretches both): a blocked loop would show one gap as long as the run.
      assert.ok(
        maxGap < Math.max(50, runMs / 2),
        `longest event-loop gap ${maxGap.toFixed(1)} ms during a ${runMs.toFixed(0)} ms run`,
      );
    } finally {
      await m.close();
    }
  });

  it('cancellation terminates the running run (CANCELLED, early) and the next run is normal', async () => {
    const m = await open(join(dir, 'chain.onnx'), {
      max_batch_size: 0,
      parameters: params({ intra_op_thread_count: '1' }),
    });
    try {
      const x = (rows: number): Tensor => ({
        name: 'X',
        datatype: 'FP32',
        shape: [rows, 128],
        data: new Float32Array(rows * 128).fill(1),
      });
      const t0 = performance.now();
      await m.instances[0].execute([request([x(LONG)], ['Y'], 1)], new Collected(), never());
      const fullMs = performance.now() - t0;
      const ac = new AbortController();
      setTimeout(() => ac.abort(), Math.max(5, fullMs / 10));
      const t1 = performance.now();
      await assert.rejects(
        m.instances[0].execute([request([x(LONG)], ['Y'], 1)], new Collected(), ac.signal),
        CancelledError,
      );
      const cancelledMs = performance.now() - t1;
      assert.ok(
        cancelledMs < fullMs * 0.7,
        `cancelled after ${cancelledMs.toFixed(0)} ms, a full run takes ${fullMs.toFixed(0)} ms`,
      );
      const r = new Collected();
      await m.instances[0].execute([request([x(2)], ['Y'], 1)], r, never());
      assert.equal((r.response(0).outputs[0].data as Float32Array)[0], 1);
      await assert.rejects(
        m.instances[0].execute([request([x(2)], ['Y'], 1)], new Collected(), AbortSignal.abort()),
        CancelledError,
      );
    } finally {
      await m.close();
    }
  });

  it('destroy during an in-flight run terminates it, waits for it, then releases the session', async () => {
    const m = await open(
      join(dir, 'chain.onnx'),
      { max_batch_size: 0, parameters: params({ intra_op_thread_count: '1' }) },
      { count: 2 },
    );
    const x: Tensor = { name: 'X', datatype: 'FP32', shape: [LONG, 128], data: new Float32Array(LONG * 128).fill(1) };
    // The order things end in, not their times (load stretches those): each run ends before what terminated it
    // (destroy for instance 0, unload for instance 1) does. Destroy may end before the other run: it waits for its
    // own instance only.
    const order: string[] = [];
    const noted = <T>(name: string, p: Promise<T>): Promise<T> => p.finally(() => order.push(name));
    const running = Promise.allSettled([
      noted('run', m.instances[0].execute([request([x], ['Y'], 1)], new Collected(), never())),
    ]);
    const other = Promise.allSettled([
      noted('other', m.instances[1].execute([request([x], ['Y'], 1)], new Collected(), never())),
    ]);
    await new Promise((r) => setTimeout(r, 20));
    const [destroyed, unloaded] = await Promise.allSettled([
      noted('destroy', m.instances[0].destroy()),
      noted('unload', m.model.unload()),
    ]);
    assert.equal(destroyed.status, 'fulfilled');
    assert.equal(unloaded.status, 'fulfilled');
    const [run] = await running;
    assert.ok(run.status === 'rejected' && run.reason instanceof CancelledError, 'the in-flight run ends CANCELLED');
    const [o] = await other;
    assert.ok(o.status === 'rejected' && o.reason instanceof CancelledError, 'unload terminated the other too');
    // Terminated, not run to its end (that would be fulfilled, above), and waited for before the session went.
    assert.ok(order.indexOf('run') < order.indexOf('destroy'), `ended in the order ${order}`);
    assert.ok(order.indexOf('other') < order.indexOf('unload'), `ended in the order ${order}`);
    await assert.rejects(m.instances[0].execute([request([x], ['Y'], 1)], new Collected(), never()), UnavailableError);
  });

  it('runs N instances in parallel (one pool thread each)', async () => {
    const m = await open(
      join(dir, 'chain.onnx'),
      { max_batch_size: 0, parameters: params({ intra_op_thread_count: '1' }) },
      { count: 2 },
    );
    try {
      const x: Tensor = { name: 'X', datatype: 'FP32', shape: [16, 128], data: new Float32Array(16 * 128).fill(1) };
      const one = async (i: number): Promise<[number, number]> => {
        const t = performance.now();
        await m.instances[i].execute([request([x], ['Y'], 1)], new Collected(), never());
        return [t, performance.now()];
      };
      await one(0);
      const [[s0, e0], [s1, e1]] = await Promise.all([one(0), one(1)]);
      // The runs overlap in time (neither waits for the other to finish).
      assert.ok(
        s1 < e0 && s0 < e1,
        `runs [${s0.toFixed(0)},${e0.toFixed(0)}] and [${s1.toFixed(0)},${e1.toFixed(0)}] overlap`,
      );
    } finally {
      await m.close();
    }
  });
});

describe('onnxruntime C API engine on GPUs, on a machine without one', () => {
  it('BAD CONFIG - KIND_GPU fails the load UNAVAILABLE naming the missing provider library and how to get it', async () => {
    await assert.rejects(open(SIMPLE, { max_batch_size: 8 }, { kind: 'KIND_GPU', device: 0 }), (e: unknown) => {
      assert.ok(e instanceof UnavailableError, String(e));
      assert.match(e.message, /CUDA execution provider is unavailable/);
      assert.match(e.message, /libonnxruntime_providers_(shared|cuda)\.so' is missing/);
      assert.match(e.message, /nereid gpu setup/);
      assert.match(e.message, /onnxruntime-gpu 1\.30\.0/);
      return true;
    });
  });

  it('BAD CONFIG - the TensorRT accelerator fails UNAVAILABLE, never a silent fall-back', async () => {
    const config = {
      optimization: {
        execution_accelerators: {
          gpu_execution_accelerator: [{ name: 'tensorrt', parameters: { precision_mode: 'FP16' } }],
        },
      },
    };
    await assert.rejects(open(SIMPLE, config, { kind: 'KIND_GPU', device: 0 }), (e: unknown) => {
      assert.ok(e instanceof UnavailableError, String(e));
      assert.match(e.message, /TensorRT execution provider is unavailable: the library 'libonnxruntime_providers_/);
      return true;
    });
  });

  it('BAD CONFIG - OpenVINO for the CPU fails UNAVAILABLE: this onnxruntime has no OpenVINO provider', async () => {
    const config = { optimization: { execution_accelerators: { cpu_execution_accelerator: [{ name: 'openvino' }] } } };
    await assert.rejects(open(SIMPLE, config), (e: unknown) => {
      assert.ok(e instanceof UnavailableError, String(e));
      assert.match(e.message, /OpenVINO execution provider is unavailable/);
      return true;
    });
  });

  it('BAD CONFIG - an unknown CUDA or TensorRT provider option is a load error naming it', async () => {
    const cuda = {
      optimization: {
        execution_accelerators: { gpu_execution_accelerator: [{ name: 'cuda', parameters: { cudnn_turbo: '1' } }] },
      },
    };
    await assert.rejects(
      open(SIMPLE, cuda, { kind: 'KIND_GPU', device: 0 }),
      (e: unknown) => e instanceof InvalidArgError && /unknown parameter 'cudnn_turbo'/.test(e.message),
    );
    const trt = {
      optimization: {
        execution_accelerators: {
          gpu_execution_accelerator: [{ name: 'tensorrt', parameters: { trt_warp_drive: '1' } }],
        },
      },
    };
    await assert.rejects(
      open(SIMPLE, trt),
      (e: unknown) => e instanceof InvalidArgError && /unknown parameter 'trt_warp_drive'/.test(e.message),
    );
  });

  it('KIND_AUTO resolves to CPU here; KIND_MODEL is refused', async () => {
    const d = onnxruntimeDescriptor();
    assert.equal(d.kinds[0], 'KIND_CPU');
    assert.ok(d.datatypes.includes('BF16'));
    await assert.rejects(open(SIMPLE, {}, { kind: 'KIND_MODEL' }), /KIND_MODEL/);
  });

  it('classifies CUDA sticky errors (instance dies) apart from out-of-memory (request fails)', () => {
    assert.ok(isStickyError(new Error('CUDA failure 700: an illegal memory access was encountered')));
    assert.ok(isStickyError(new Error('CUDA error cudaErrorLaunchFailure:unspecified launch failure')));
    assert.ok(!isStickyError(new Error('Failed to allocate memory for requested buffer of size 8589934592')));
    assert.ok(!isStickyError(new Error('CUDA failure 2: out of memory')));
  });

  it('BAD MODEL - a model with an unsupported type is refused UNSUPPORTED', async () => {
    const file = join(dir, 'complex.onnx');
    await writeModel(file, identityModel(14));
    await assert.rejects(open(file, {}), (e: unknown) => e instanceof UnsupportedError || e instanceof InvalidArgError);
  });
});
