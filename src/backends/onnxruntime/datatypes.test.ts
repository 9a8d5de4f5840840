import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ELEM, identityModel, writeModel } from '../../../test/fixtures/onnx-builder.js';
import { DATATYPES, type DataType } from '../../core/datatypes.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import { noopLogger } from '../../core/logger.js';
import type { Tensor, TensorData } from '../../core/tensor.js';
import { executeOne, loadForTest } from '../../../test/helpers/engine.js';
import { onnxruntimeBackend } from './backend.js';

const backend = onnxruntimeBackend();
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'nereid-ort-dt-'));
});
after(() => rm(dir, { recursive: true, force: true }));

const complete = (file: string) =>
  backend.autoComplete(
    {},
    { modelName: 'm', modelPath: file, backendConfig: {}, autoComplete: true, logger: noopLogger },
  );

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

/** One sample per datatype that onnxruntime-node can carry, with the ONNX element type of its model. */
const CASES: [DataType, number, () => TensorData][] = [
  ['INT8', ELEM.INT8, () => Int8Array.of(-128, 0, 127)],
  ['INT16', ELEM.INT16, () => Int16Array.of(-32768, 1, 32767)],
  ['INT32', ELEM.INT32, () => Int32Array.of(-(2 ** 31), 2, 2 ** 31 - 1)],
  ['INT64', ELEM.INT64, () => BigInt64Array.of(-(2n ** 63n), 3n, 2n ** 63n - 1n)],
  ['UINT8', ELEM.UINT8, () => Uint8Array.of(0, 1, 255)],
  ['UINT16', ELEM.UINT16, () => Uint16Array.of(0, 1, 65535)],
  ['UINT32', ELEM.UINT32, () => Uint32Array.of(0, 1, 2 ** 32 - 1)],
  ['UINT64', ELEM.UINT64, () => BigUint64Array.of(0n, 1n, 2n ** 64n - 1n)],
  ['FP16', ELEM.FLOAT16, () => Uint16Array.of(0x3c00, 0xc000, 0x7c00)], // 1, -2, +inf as raw bits
  ['FP32', ELEM.FLOAT, () => Float32Array.of(1.5, -0, Number.NaN)],
  ['FP64', ELEM.DOUBLE, () => Float64Array.of(Math.PI, -1e300, Number.POSITIVE_INFINITY)],
  ['BOOL', ELEM.BOOL, () => Uint8Array.of(1, 0, 1)],
  ['BYTES', ELEM.STRING, () => [utf8('héllo'), utf8(''), utf8('日本')]],
];

describe('onnxruntime backend datatypes', () => {
  for (const [datatype, elem, sample] of CASES) {
    it(`round-trips ${datatype} through Identity`, async () => {
      const file = join(dir, `id-${datatype}.onnx`);
      await writeModel(file, identityModel(elem));
      const c = await complete(file);
      assert.equal(c.input?.[0].data_type, DATATYPES[datatype].configName);
      const model = await loadForTest(backend, { name: datatype, modelDir: dir, modelPath: file });
      try {
        const input: Tensor = { name: 'INPUT', datatype, shape: [3], data: sample() };
        const r = await executeOne(model.instances[0], { inputs: [input], outputs: ['OUTPUT'] });
        const out = r.outputs[0];
        assert.equal(out.datatype, datatype);
        assert.deepEqual(out.shape, [3]);
        if (datatype === 'BYTES') {
          assert.deepEqual(
            (out.data as Uint8Array[]).map((e) => new TextDecoder().decode(e)),
            ['héllo', '', '日本'],
          );
        } else {
          assert.deepEqual(out.data, sample());
        }
      } finally {
        await model.close();
      }
    });
  }

  it('BAD INPUT - BYTES that are not UTF-8 are INVALID_ARG (ORT strings are text)', async () => {
    const file = join(dir, 'id-str.onnx');
    await writeModel(file, identityModel(ELEM.STRING));
    const model = await loadForTest(backend, { name: 's', modelDir: dir, modelPath: file });
    try {
      const input: Tensor = { name: 'INPUT', datatype: 'BYTES', shape: [1], data: [Uint8Array.of(0xff, 0xfe)] };
      await assert.rejects(
        executeOne(model.instances[0], { inputs: [input], outputs: ['OUTPUT'] }),
        (e: unknown) => e instanceof InvalidArgError && /not valid UTF-8/.test(e.message),
      );
      const bf16: Tensor = { name: 'INPUT', datatype: 'BF16', shape: [1], data: Uint16Array.of(0x3f80) };
      await assert.rejects(
        executeOne(model.instances[0], { inputs: [bf16], outputs: ['OUTPUT'] }),
        (e: unknown) => e instanceof InvalidArgError && /BF16/.test(e.message),
      );
    } finally {
      await model.close();
    }
  });

  it('BAD MODEL - a BF16 model is an UNSUPPORTED load error that says BF16', async () => {
    const file = join(dir, 'id-bf16.onnx');
    await writeModel(file, identityModel(ELEM.BFLOAT16));
    await assert.rejects(complete(file), (e: unknown) => e instanceof UnsupportedError && /BF16/.test(e.message));
  });
});
