import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gatherModel, nonZeroModel } from '../../../test/fixtures/capi-models.js';
import { addSubModel, ELEM, identityModel, writeModel } from '../../../test/fixtures/onnx-builder.js';
import { Collected, never, open, params, request } from '../../../test/helpers/capi-engine.js';
import type { DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { Tensor } from '../../core/tensor.js';
import { envReferences } from './capi/env.js';

/**
 * The onnxruntime C API engine, in process: what a run answers. Batching, output shapes, every datatype, and run
 * errors. Loading, refusals, threads, cancellation and unload during a run: engine-lifecycle.test.ts.
 */

const SIMPLE = join(import.meta.dirname, '../../../examples/model_repository/simple/1/model.onnx');
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-capi-'));
  await writeModel(join(dir, 'gather.onnx'), gatherModel());
  await writeModel(join(dir, 'fixed.onnx'), addSubModel(ELEM.INT32, [2, 16]));
  await writeModel(join(dir, 'nonzero.onnx'), nonZeroModel());
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
  assert.equal(envReferences(), 0, 'every load released its OrtEnv reference');
});

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

  it('runs a short model inline once a pooled run measured it short; its answers stay right', async () => {
    const m = await open(SIMPLE, { max_batch_size: 8 });
    try {
      for (let k = 0; k < 20; k++) {
        const r = new Collected();
        await m.instances[0].execute(
          [request([i32('INPUT0', 1, (i) => i + k), i32('INPUT1', 1, () => 1)], ['OUTPUT0', 'OUTPUT1'])],
          r,
          never(),
        );
        const [sum, diff] = r.response(0).outputs.map((t) => t.data as Int32Array);
        assert.deepEqual([sum[0], diff[15]], [k + 1, k + 14]);
      }
      const counts = m.instances[0].runCounts();
      // Pooled: at least the first run; a busy machine may stretch a few pooled runs past the probe bound.
      assert.ok(counts.pooled >= 1 && counts.inline >= 10, `runs: ${JSON.stringify(counts)}`);
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
});
