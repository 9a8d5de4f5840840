import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InferTensorContentsMsg, ModelInferRequestMsg } from './messages.js';
import { decodeModelInferRequest } from './infer-request.js';

const EMPTY: InferTensorContentsMsg = {
  bool_contents: [],
  int_contents: [],
  int64_contents: [],
  uint_contents: [],
  uint64_contents: [],
  fp32_contents: [],
  fp64_contents: [],
  bytes_contents: [],
};

function request(
  datatype: string,
  shape: number[],
  data: Partial<InferTensorContentsMsg> | Buffer,
): ModelInferRequestMsg {
  const raw = Buffer.isBuffer(data);
  return {
    model_name: 'm',
    model_version: '',
    id: '',
    parameters: {},
    inputs: [
      {
        name: 'X',
        datatype,
        shape: shape.map(String),
        parameters: {},
        contents: raw ? null : { ...EMPTY, ...data },
      },
    ],
    outputs: [],
    raw_input_contents: raw ? [data] : [],
  };
}

const decoded = (msg: ModelInferRequestMsg): unknown => decodeModelInferRequest(msg).inputs[0].data;

describe('decodeModelInferRequest', () => {
  it('decodes typed contents of every datatype that has a field', () => {
    assert.deepEqual(decoded(request('BOOL', [3], { bool_contents: [true, false, true] })), new Uint8Array([1, 0, 1]));
    assert.deepEqual(decoded(request('INT8', [2], { int_contents: [-3, 127] })), new Int8Array([-3, 127]));
    assert.deepEqual(decoded(request('INT16', [2], { int_contents: [-300, 5] })), new Int16Array([-300, 5]));
    assert.deepEqual(decoded(request('INT32', [2], { int_contents: [-70000, 5] })), new Int32Array([-70000, 5]));
    assert.deepEqual(
      decoded(request('INT64', [2], { int64_contents: ['-9223372036854775808', '9007199254740993'] })),
      new BigInt64Array([-9223372036854775808n, 9007199254740993n]),
    );
    assert.deepEqual(decoded(request('UINT8', [2], { uint_contents: [0, 255] })), new Uint8Array([0, 255]));
    assert.deepEqual(decoded(request('UINT16', [1], { uint_contents: [65535] })), new Uint16Array([65535]));
    assert.deepEqual(decoded(request('UINT32', [1], { uint_contents: [4294967295] })), new Uint32Array([4294967295]));
    assert.deepEqual(
      decoded(request('UINT64', [1], { uint64_contents: ['18446744073709551615'] })),
      new BigUint64Array([18446744073709551615n]),
    );
    assert.deepEqual(decoded(request('FP32', [2], { fp32_contents: [1.5, -2] })), new Float32Array([1.5, -2]));
    assert.deepEqual(decoded(request('FP64', [1], { fp64_contents: [Math.PI] })), new Float64Array([Math.PI]));
    const bytes = decoded(request('BYTES', [2], { bytes_contents: [Buffer.from('ab'), Buffer.alloc(0)] })) as Buffer[];
    assert.deepEqual(
      bytes.map((b) => Buffer.from(b).toString()),
      ['ab', ''],
    );
  });

  it('decodes raw contents of every datatype, FP16/BF16 and BYTES included', () => {
    const fp16 = Buffer.from(new Uint16Array([0x3c00, 0xc000]).buffer);
    assert.deepEqual(decoded(request('FP16', [2], fp16)), new Uint16Array([0x3c00, 0xc000]));
    assert.deepEqual(decoded(request('BF16', [2], fp16)), new Uint16Array([0x3c00, 0xc000]));
    const i64 = Buffer.from(new BigInt64Array([-1n, 2n ** 62n]).buffer);
    assert.deepEqual(decoded(request('INT64', [2], i64)), new BigInt64Array([-1n, 2n ** 62n]));
    const f64 = Buffer.from(new Float64Array([0.25]).buffer);
    assert.deepEqual(decoded(request('FP64', [1, 1], f64)), new Float64Array([0.25]));
    const wire = Buffer.from([2, 0, 0, 0, 0x68, 0x69, 0, 0, 0, 0]);
    const strs = decoded(request('BYTES', [2], wire)) as Uint8Array[];
    assert.deepEqual(
      strs.map((b) => Buffer.from(b).toString()),
      ['hi', ''],
    );
  });

  it('copies raw data once when its offset is not aligned for the datatype', () => {
    const backing = Buffer.alloc(9);
    const unaligned = backing.subarray(1);
    unaligned.writeInt32LE(7, 0);
    unaligned.writeInt32LE(-7, 4);
    assert.deepEqual(decoded(request('INT32', [2], unaligned)), new Int32Array([7, -7]));
  });

  it('BAD CALL - FP16 in typed contents is refused (it has no field)', () => {
    assert.throws(() => decoded(request('FP16', [1], { fp32_contents: [1] })), /unexpected explicit tensor data/);
  });

  it('BAD CALL - a negative or huge shape dim', () => {
    assert.throws(() => decoded(request('INT32', [-1], { int_contents: [] })), /non-negative/);
    const msg = request('INT32', [1], { int_contents: [1] });
    msg.inputs[0].shape = ['9223372036854775807'];
    assert.throws(
      () => decoded(msg),
      /byte size overflow for input 'X': element count \(9223372036854775807\) \* data type size \(4\)/,
    );
  });

  it('keeps int64 parameters exact and maps classification to classCount', () => {
    const msg = request('INT32', [1], { int_contents: [1] });
    msg.parameters = { big: { parameter_choice: 'int64_param', int64_param: '9007199254740993' } };
    msg.outputs = [
      { name: 'Y', parameters: { classification: { parameter_choice: 'int64_param', int64_param: '3' } } },
    ];
    const req = decodeModelInferRequest(msg);
    assert.equal(req.parameters?.big, 9007199254740993n);
    assert.deepEqual(req.outputs, [{ name: 'Y', classCount: 3 }]);
  });
});
