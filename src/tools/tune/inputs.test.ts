import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ModelMetadata, OutputTensor } from '../../client/index.js';
import { floatToHalfBits } from '../../core/half.js';
import { compareAnswers } from './compare.js';
import { generatedRequests, parseShapes, requestsFromFile } from './inputs.js';

const meta = {
  name: 'm',
  versions: ['1'],
  platform: 'onnxruntime_onnx',
  inputs: [
    { name: 'ids', datatype: 'INT64', shape: [-1, -1] },
    { name: 'x', datatype: 'FP32', shape: [-1, 4] },
  ],
  outputs: [],
} as ModelMetadata;

describe('tune requests', () => {
  it('generates the real shapes: batch 1, variable dimensions from --shape or 16, the same values every run', () => {
    const [a] = generatedRequests(meta, true, parseShapes(['ids:8']), 1);
    assert.deepEqual(
      a.map((t) => [t.name, t.shape]),
      [
        ['ids', [1, 8]],
        ['x', [1, 4]],
      ],
    );
    assert.ok(a[0].data instanceof BigInt64Array && [...a[0].data].every((v) => v === 0n || v === 1n));
    assert.deepEqual(generatedRequests(meta, true, new Map(), 2)[1][0].shape, [1, 16]);
    assert.deepEqual(generatedRequests(meta, true, new Map(), 2), generatedRequests(meta, true, new Map(), 2));
    assert.throws(() => parseShapes(['ids']), /--shape 'ids': expected NAME:d1,d2/);
  });

  it("reads perf_analyzer's --input-data JSON: flat content or content with a shape", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'nereid-tune-input-'));
    try {
      const file = join(dir, 'data.json');
      const data = [{ ids: [5, 6, 7], x: { content: [1, 2, 3, 4], shape: [4] } }];
      await writeFile(file, JSON.stringify({ data }));
      const [r] = await requestsFromFile(file, meta, true);
      assert.deepEqual(r[0].shape, [1, 3]);
      assert.deepEqual([...(r[0].data as BigInt64Array)], [5n, 6n, 7n]);
      assert.deepEqual(r[1].shape, [1, 4]);
      await writeFile(file, JSON.stringify({ data: [{ ids: [1] }] }));
      await assert.rejects(requestsFromFile(file, meta, true), /data\[0\] has no input 'x'/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('tune answer checks', () => {
  const out = (datatype: OutputTensor['datatype'], data: OutputTensor['data']): OutputTensor[] => [
    { name: 'y', datatype, shape: [data.length], data },
  ];
  it('compares floats within the datatype tolerance and everything else exactly', () => {
    assert.equal(
      compareAnswers([out('FP32', new Float32Array([1, 2]))], [out('FP32', new Float32Array([1.00001, 2]))]),
      undefined,
    );
    assert.match(
      compareAnswers([out('FP32', new Float32Array([1, 2]))], [out('FP32', new Float32Array([1.01, 2]))]) ?? '',
      /request 0: 'y'\[0\] is 1\.0099.*, the default config answers 1/,
    );
    const half = (xs: number[]) => new Uint16Array(xs.map(floatToHalfBits));
    assert.equal(compareAnswers([out('FP16', half([1, 2]))], [out('FP16', half([1.001, 2]))]), undefined);
    assert.match(
      compareAnswers([out('INT32', new Int32Array([1]))], [out('INT32', new Int32Array([2]))]) ?? '',
      /is 2/,
    );
    assert.match(
      compareAnswers([out('INT32', new Int32Array([1]))], [out('INT32', new Int32Array([1, 1]))]) ?? '',
      /shape/,
    );
    const bytes = (s: string) => [new TextEncoder().encode(s)];
    assert.match(compareAnswers([out('BYTES', bytes('a'))], [out('BYTES', bytes('b'))]) ?? '', /is b/);
  });
});
