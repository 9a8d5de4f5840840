import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildModel, ELEM } from '../../../test/fixtures/onnx-builder.js';
import { externalDataLocations } from './external-data.js';

/** Minimal protobuf writer for shapes the test builder cannot make (nested graphs, sparse tensors). */
const varint = (n: number): number[] => {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return out;
};
const field = (num: number, body: Uint8Array | string): number[] => {
  const bytes = typeof body === 'string' ? new TextEncoder().encode(body) : body;
  return [...varint(num * 8 + 2), ...varint(bytes.length), ...bytes];
};
const msg = (...parts: number[][]): Uint8Array => Uint8Array.from(parts.flat());
const externalTensor = (location: string): Uint8Array =>
  msg(field(8, 'w'), field(13, msg(field(1, 'location'), field(2, location))), [14 * 8, 1]);

describe('externalDataLocations', () => {
  it('finds the locations of initializers stored outside the model file', () => {
    const model = buildModel({
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [2] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [2] }],
      initializers: [
        { name: 'A', elemType: ELEM.FLOAT, dims: [2], data: new Float32Array(2), external: 'weights.bin' },
        { name: 'B', elemType: ELEM.FLOAT, dims: [2], data: new Float32Array(2), external: '../../etc/passwd' },
        { name: 'C', elemType: ELEM.FLOAT, dims: [2], data: new Float32Array([1, 2]) },
      ],
      nodes: [{ op: 'Add', inputs: ['X', 'A'], outputs: ['Y'] }],
    });
    assert.deepEqual(externalDataLocations(model).sort(), ['../../etc/passwd', 'weights.bin']);
  });

  it('finds locations in subgraphs of node attributes, sparse initializers and functions', () => {
    const inner = msg(field(5, externalTensor('/abs/inner.bin'))); // GraphProto.initializer
    const attribute = msg(field(1, 'then_branch'), field(6, inner)); // AttributeProto.g
    const node = msg(field(4, 'If'), field(5, attribute)); // NodeProto.attribute
    const sparse = msg(field(1, externalTensor('sparse.bin'))); // SparseTensorProto.values
    const graph = msg(field(1, node), field(15, sparse)); // GraphProto.node, .sparse_initializer
    const fnNode = msg(field(5, msg(field(5, externalTensor('fn.bin'))))); // NodeProto.attribute.t
    const fn = msg(field(7, fnNode)); // FunctionProto.node
    const model = msg([8, 8], field(7, graph), field(25, fn)); // ir_version, graph, functions
    assert.deepEqual(externalDataLocations(model).sort(), ['/abs/inner.bin', 'fn.bin', 'sparse.bin']);
  });

  it('a self-contained model has none', () => {
    const model = buildModel({
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [2] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [2] }],
      nodes: [{ op: 'Identity', inputs: ['X'], outputs: ['Y'] }],
    });
    assert.deepEqual(externalDataLocations(model), []);
  });

  it('BAD INPUT - truncated, garbage and deeply nested files are refused as invalid, never a crash', () => {
    const model = buildModel({
      inputs: [{ name: 'X', elemType: ELEM.FLOAT, dims: [2] }],
      outputs: [{ name: 'Y', elemType: ELEM.FLOAT, dims: [2] }],
      nodes: [{ op: 'Identity', inputs: ['X'], outputs: ['Y'] }],
    });
    assert.throws(() => externalDataLocations(model.subarray(0, model.length - 3)), /not a valid ONNX model/);
    assert.throws(() => externalDataLocations(Uint8Array.from([0xff, 0xff, 0xff])), /not a valid ONNX model/);
    assert.throws(() => externalDataLocations(Uint8Array.from([7 * 8 + 3])), /wire type 3/);
    let graph = msg();
    for (let i = 0; i < 200; i++) graph = msg(field(1, msg(field(5, msg(field(6, graph))))));
    assert.throws(() => externalDataLocations(msg(field(7, graph))), /nest deeper than/);
  });
});
