import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { buildModel, overridableModel } from '../../../test/fixtures/onnx-builder.js';
import { overridableSignatures, releaseInitializers } from './initializers.js';

describe('overridable initializers', () => {
  const bytes = buildModel(overridableModel());

  it("finds graph inputs that have an initializer, with the initializer's type and dims", () => {
    assert.deepEqual(overridableSignatures(bytes, 'm'), [{ name: 'B', datatype: 'FP32', dims: [2] }]);
  });

  it('cuts a declared initializer out of the model so onnxruntime takes it as an input, and keeps its value', async () => {
    const { model, defaults } = releaseInitializers(bytes, new Set(['B']), 'm');
    assert.deepEqual(
      defaults.map((d) => [d.initial.name, [...(d.initial.data as Float32Array)]]),
      [['B', [10, 20]]],
    );
    assert.ok(model.length < bytes.length);
    const session = await InferenceSession.create(model);
    try {
      assert.deepEqual(session.inputNames, ['A', 'B']);
      const out = await session.run({
        A: new Tensor('float32', Float32Array.of(1, 2), [2]),
        B: new Tensor('float32', Float32Array.of(3, 4), [2]),
      });
      assert.deepEqual([...(out.Y.data as Float32Array)], [4, 6]);
    } finally {
      await session.release();
    }
  });

  it('leaves the model alone when no declared name is an overridable initializer', () => {
    const { model, defaults } = releaseInitializers(bytes, new Set(['A', 'nope']), 'm');
    assert.equal(model, bytes);
    assert.deepEqual(defaults, []);
  });

  it('BAD FILE - a file that is not an ONNX model is an INVALID_ARG, not a crash', () => {
    assert.throws(() => overridableSignatures(Uint8Array.of(0x0a, 0xff), 'm'), /not a valid protobuf|has no graph/);
    assert.throws(() => overridableSignatures(Uint8Array.of(0x08, 0x01), 'm'), /has no graph/);
  });
});
