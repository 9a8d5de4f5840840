import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gatherModel, matmulChainModel, nonZeroModel } from '../../../test/fixtures/capi-models.js';
import { addSubModel, ELEM, identityModel, writeModel } from '../../../test/fixtures/onnx-builder.js';
import { Collected, never, open, params, request } from '../../../test/helpers/capi-engine.js';
import type { DataType } from '../../core/datatypes.js';
import { CancelledError, InvalidArgError, UnavailableError, UnsupportedError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { envReferences } from './capi/env.js';
import { onnxruntimeDescriptor } from './descriptor.js';
import { isStickyError } from './errors.js';
import { autoCompleteOnnx, readSignature } from './signature.js';

/**
 * The onnxruntime C API engine, in process: execution, batching, every datatype, errors, cancellation,
 * unload during a run, and GPU requests on a machine without a GPU.
 */

const SIMPLE = join(import.meta.dirname, '../../../examples/model_repository/simple/1/model.onnx');
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-capi-'));
  await writeModel(join(dir, 'chain.onnx'), matmulChainModel(3000, 128));
  await writeModel(join(dir, 'gather.onnx'), gatherModel());
  await writeModel(join(dir, 'fixed.onnx'), addSubModel(ELEM.INT32, [2, 16]));
  await writeModel(join(dir, 'nonzero.onnx'), nonZeroModel());
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
  assert.equal(envReferences(), 0, 'every load released its OrtEnv reference');
});

/** Rows of X that make the 3000-MatMul chain run for hundreds of milliseconds on one thread. */
const LONG = 1024;

const i32 = (name: string, rows: number, fill: (i: number) => number): Tensor => ({
  name,
  datatype: 'INT32',
  shape: [rows, 16],
  data: Int32Array.from({ length: rows * 16 }, (_, i) => fill(i)),
});

describe('onnxruntime C API engine', () => {
  it('runs simple in process and answers every request of a batch with its own rows', async () => {
    const m = await open(SIMPLE, { max_batch_size: 8, parameters: params({ intra_op_thread_count: '1' }) });
    try {
      const r = new Collected();
      const requests = [
        request([i32('INPUT0', 1, (i) => i), i32('INPUT1', 1, () => 1)], ['OUTPUT0', 'OUTPUT1']),
        request([i32('INPUT0', 3, (i) => 100 + i), i32('INPUT1', 3, () => 2)], ['OUTPUT1']),
      ];
      const timings = await m.instances[0].execute(requests, r, never());
      assert.ok(timings.computeInferNs > 0);
      const a = r.response(0).outputs;
      assert.deepEqual(
        a.map((t) => [t.name, t.shape]),
        [
          ['OUTPUT0', [1, 16]],
          ['OUTPUT1', [1, 16]],
        ],
      );
      assert.deepEqual(Array.from(a[0].data as Int32Array).slice(0, 3), [1, 2, 3]);
      const b = r.response(1).outputs;
      assert.deepEqual(b[0].shape, [3, 16]);
      assert.deepEqual(Array.from(b[0].data as Int32Array).slice(0, 2), [98, 99]);
      assert.equal((b[0].data as Int32Array).length, 48);
      assert.ok(r.finals.has(0) && r.finals.has(1));
    } finally {
      await m.close();
    }
  });

  it('runs repeated input shapes into fresh preallocated outputs: each response keeps its own values', async () => {
    const m = await open(SIMPLE, { max_batch_size: 8 });
    try {
      const seen: Int32Array[] = [];
      // The first run of a shape is copied out, the later ones are written in place by onnxruntime.
      for (let k = 0; k < 4; k++) {
        const r = new Collected();
        await m.instances[0].execute(
          [request([i32('INPUT0', 2, (i) => i * (k + 1)), i32('INPUT1', 2, () => k)], ['OUTPUT0', 'OUTPUT1'])],
          r,
          never(),
        );
        const [o0, o1] = r.response(0).outputs;
        assert.deepEqual(o0.shape, [2, 16]);
        seen.push(o0.data as Int32Array);
        assert.deepEqual(
          Array.from((o1.data as Int32Array).slice(0, 3)),
          [0, 1, 2].map((i) => i * (k + 1) - k),
        );
      }
      seen.forEach((d, k) =>
        assert.deepEqual(
          Array.from(d.slice(0, 3)),
          [0, 1, 2].map((i) => i * (k + 1) + k),
        ),
      );
      assert.equal(new Set(seen.map((d) => d.buffer)).size, 4, 'every run has its own output memory');
    } finally {
      await m.close();
    }
  });

  it('answers right when an output shape depends on input values (a wrong preallocation guess is retried)', async () => {
    const m = await open(join(dir, 'nonzero.onnx'), { max_batch_size: 0 });
    try {
      const x = (...v: number[]): Tensor => ({
        name: 'X',
        datatype: 'INT64',
        shape: [v.length],
        data: BigInt64Array.from(v.map(BigInt)),
      });
      for (const [input, want] of [
        [
          [1, 0, 2],
          [0n, 2n],
        ],
        [[0, 0, 5], [2n]],
        [
          [3, 3, 3],
          [0n, 1n, 2n],
        ],
        [[0, 0, 0], []],
        [[0, 7, 0], [1n]],
      ] as const) {
        const r = new Collected();
        await m.instances[0].execute([request([x(...input)], ['Y'], 1)], r, never());
        const y = r.response(0).outputs[0];
        assert.deepEqual(y.shape, [1, want.length]);
        assert.deepEqual(Array.from(y.data as BigInt64Array), want);
      }
    } finally {
      await m.close();
    }
  });

  it('leaves the request inputs untouched and the outputs in JavaScript-owned memory', async () => {
    const m = await open(SIMPLE, { max_batch_size: 8 });
    try {
      const in0 = i32('INPUT0', 2, (i) => i);
      const before = Array.from(in0.data as Int32Array);
      const r = new Collected();
      await m.instances[0].execute([request([in0, i32('INPUT1', 2, () => 5)], ['OUTPUT0'])], r, never());
      assert.deepEqual(Array.from(in0.data as Int32Array), before);
      const out = r.response(0).outputs[0].data as Int32Array;
      assert.ok(out.buffer instanceof ArrayBuffer);
      assert.equal(out[31], 31 + 5);
    } finally {
      await m.close();
    }
  });

  const identityCases: Array<[DataType, number, Tensor['data']]> = [
    ['BOOL', ELEM.BOOL, new Uint8Array([1, 0, 1])],
    ['UINT8', ELEM.UINT8, new Uint8Array([0, 255, 7])],
    ['UINT16', ELEM.UINT16, new Uint16Array([0, 65535, 7])],
    ['UINT32', ELEM.UINT32, new Uint32Array([0, 4294967295, 7])],
    ['UINT64', ELEM.UINT64, new BigUint64Array([0n, 18446744073709551615n, 7n])],
    ['INT8', ELEM.INT8, new Int8Array([-128, 127, 0])],
    ['INT16', ELEM.INT16, new Int16Array([-32768, 32767, 0])],
    ['INT32', ELEM.INT32, new Int32Array([-5, 2147483647, 0])],
    ['INT64', ELEM.INT64, new BigInt64Array([-9223372036854775808n, 9223372036854775807n, 0n])],
    ['FP16', ELEM.FLOAT16, new Uint16Array([0x3c00, 0xc000, 0x7c00])],
    ['FP32', ELEM.FLOAT, new Float32Array([1.5, -2, Number.POSITIVE_INFINITY])],
    ['FP64', ELEM.DOUBLE, new Float64Array([1e300, -0.5, 0])],
    ['BF16', ELEM.BFLOAT16, new Uint16Array([0x3f80, 0xc000, 0x7f80])],
  ];
  for (const [datatype, elem, data] of identityCases) {
    it(`round-trips ${datatype} through an Identity model bit for bit`, async () => {
      const file = join(dir, `id-${datatype}.onnx`);
      await writeModel(file, identityModel(elem));
      const m = await open(file, {});
      try {
        const r = new Collected();
        await m.instances[0].execute(
          [request([{ name: 'INPUT', datatype, shape: [3], data }], ['OUTPUT'], 1)],
          r,
          never(),
        );
        const out = r.response(0).outputs[0];
        assert.equal(out.datatype, datatype);
        assert.deepEqual(out.shape, [3]);
        assert.deepEqual(Array.from(out.data as Uint8Array), Array.from(data as Uint8Array));
      } finally {
        await m.close();
      }
    });
  }

  it('round-trips BYTES (UTF-8 text, empty elements) through a string tensor', async () => {
    const file = join(dir, 'id-bytes.onnx');
    await writeModel(file, identityModel(ELEM.STRING));
    const m = await open(file, {});
    try {
      const enc = new TextEncoder();
      const elems = ['héllo', '', 'wörld ✓'].map((s) => enc.encode(s));
      const r = new Collected();
      await m.instances[0].execute(
        [request([{ name: 'INPUT', datatype: 'BYTES', shape: [3], data: elems }], ['OUTPUT'], 1)],
        r,
        never(),
      );
      const out = r.response(0).outputs[0];
      assert.equal(out.datatype, 'BYTES');
      assert.deepEqual(
        (out.data as Uint8Array[]).map((e) => new TextDecoder().decode(e)),
        ['héllo', '', 'wörld ✓'],
      );
      // A big tensor goes element by element (beyond koffi's call heap); same answer.
      const many = Array.from({ length: 3000 }, (_, i) => enc.encode(`${i}:${'x'.repeat(100)}`));
      const r2 = new Collected();
      await m.instances[0].execute(
        [request([{ name: 'INPUT', datatype: 'BYTES', shape: [3000], data: many }], ['OUTPUT'], 1)],
        r2,
        never(),
      );
      const back = r2.response(0).outputs[0].data as Uint8Array[];
      assert.equal(back.length, 3000);
      assert.equal(new TextDecoder().decode(back[2999]), `2999:${'x'.repeat(100)}`);
      // onnxruntime's strings are C strings: a NUL would cut an element short, so it is refused.
      await assert.rejects(
        m.instances[0].execute(
          [
            request(
              [{ name: 'INPUT', datatype: 'BYTES', shape: [1], data: [new Uint8Array([104, 0, 105])] }],
              ['OUTPUT'],
              1,
            ),
          ],
          new Collected(),
          never(),
        ),
        (e: unknown) => e instanceof InvalidArgError && /NUL byte/.test(e.message),
      );
    } finally {
      await m.close();
    }
  });

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

  it('a run error fails every request of the batch with onnxruntime’s reason; the instance keeps serving', async () => {
    const m = await open(join(dir, 'gather.onnx'), { max_batch_size: 8 });
    try {
      const idx = (v: bigint[]): Tensor => ({
        name: 'IDX',
        datatype: 'INT64',
        shape: [v.length],
        data: BigInt64Array.from(v),
      });
      const r = new Collected();
      await assert.rejects(
        m.instances[0].execute([request([idx([1n])], ['OUT']), request([idx([2n, 99n])], ['OUT'])], r, never()),
        (e: unknown) => e instanceof InvalidArgError && /onnxruntime: .*99/.test(e.message),
      );
      assert.equal(r.got.size, 0, 'the host answers the requests with the rejection');
      const ok = new Collected();
      await m.instances[0].execute([request([idx([3n])], ['OUT']), request([idx([0n, 9n])], ['OUT'])], ok, never());
      assert.deepEqual(Array.from(ok.response(0).outputs[0].data as Float32Array), [12, 13, 14, 15]);
      assert.deepEqual(Array.from(ok.response(1).outputs[0].data as Float32Array).slice(4), [36, 37, 38, 39]);
    } finally {
      await m.close();
    }
  });

  it('a model without batching runs a batch request by request: only the bad one fails', async () => {
    const m = await open(join(dir, 'gather.onnx'), { max_batch_size: 0 });
    try {
      const idx = (v: bigint): Tensor => ({ name: 'IDX', datatype: 'INT64', shape: [1], data: BigInt64Array.of(v) });
      const r = new Collected();
      await m.instances[0].execute(
        [request([idx(1n)], ['OUT'], 1), request([idx(42n)], ['OUT'], 1), request([idx(2n)], ['OUT'], 1)],
        r,
        never(),
      );
      assert.deepEqual(Array.from(r.response(0).outputs[0].data as Float32Array), [4, 5, 6, 7]);
      assert.ok(r.got.get(1) instanceof InvalidArgError);
      assert.deepEqual(Array.from(r.response(2).outputs[0].data as Float32Array), [8, 9, 10, 11]);
    } finally {
      await m.close();
    }
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
    // The order things end in, not their times (load stretches those): both runs end before destroy and unload do.
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
    assert.deepEqual(order.slice(0, 2).sort(), ['other', 'run'], `ended in the order ${order}`);
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
