import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorFromGrpc, errorFromHttp } from '../../src/client/errors.js';
import { decodeModelInferResponse, encodeModelInferRequest } from '../../src/client/grpc-codec.js';
import { decodeInferResponse, encodeInferRequest } from '../../src/client/http-codec.js';
import { callSignal } from '../../src/client/signal.js';
import { fromJsonData, toJsonData, toWireInput } from '../../src/client/tensors.js';
import {
  AlreadyExistsError,
  CancelledError,
  InternalError,
  InvalidArgError,
  NotFoundError,
  UnavailableError,
  UnknownError,
  UnsupportedError,
  bytesToStrings,
  decodeBytesTensor,
  encodeBytesTensor,
} from '../../src/client/index.js';

/** Unit tests of the client's codecs: no server, just bytes. */

const utf8 = new TextEncoder();

describe('client BYTES codec', () => {
  it('encodes strings and raw bytes with 4-byte little-endian length prefixes', () => {
    const wire = encodeBytesTensor(['hi', new Uint8Array([0, 255]), '']);
    assert.deepEqual(Array.from(wire), [2, 0, 0, 0, 104, 105, 2, 0, 0, 0, 0, 255, 0, 0, 0, 0]);
  });

  it('encodes non-ASCII text as UTF-8 and decodes it back', () => {
    const values = ['héllo', '日本語', '🙂', ''];
    const decoded = decodeBytesTensor(encodeBytesTensor(values));
    assert.deepEqual(bytesToStrings(decoded), values);
    assert.equal(decoded[1].byteLength, 9);
  });

  it('decodes with an expected count, and refuses a wrong count or a truncated element', () => {
    const wire = encodeBytesTensor(['a', 'bc']);
    assert.deepEqual(bytesToStrings(decodeBytesTensor(wire, 2)), ['a', 'bc']);
    assert.throws(() => decodeBytesTensor(wire, 3), InvalidArgError);
    assert.throws(() => decodeBytesTensor(wire.subarray(0, wire.byteLength - 1)), InvalidArgError);
    assert.throws(() => decodeBytesTensor(new Uint8Array([1, 0])), /incomplete string length/);
  });

  it('decodes an empty buffer as no elements', () => {
    assert.deepEqual(decodeBytesTensor(new Uint8Array(0)), []);
  });
});

describe('client tensor checks', () => {
  it('BAD CALL - refuses data whose array does not match the datatype', () => {
    assert.throws(
      () => toWireInput({ name: 'x', datatype: 'INT64', shape: [2], data: new Int32Array(2) }),
      /INT64 data must be a BigInt64Array, got Int32Array/,
    );
    assert.throws(
      () => toWireInput({ name: 'x', datatype: 'BYTES', shape: [1], data: new Uint8Array(1) }),
      InvalidArgError,
    );
  });

  it('BAD CALL - refuses an element count that does not match the shape', () => {
    assert.throws(
      () => toWireInput({ name: 'x', datatype: 'FP32', shape: [2, 3], data: new Float32Array(5) }),
      /shape \[2,3\] needs 6 elements, got 5/,
    );
  });

  it('prints JSON data exactly: bigint digits, booleans, UTF-8 strings', () => {
    const big = toWireInput({ name: 'x', datatype: 'INT64', shape: [2], data: BigInt64Array.of(2n ** 62n, -1n) });
    assert.equal(toJsonData(big), '[4611686018427387904,-1]');
    const bool = toWireInput({ name: 'b', datatype: 'BOOL', shape: [3], data: Uint8Array.of(1, 0, 1) });
    assert.equal(toJsonData(bool), '[true,false,true]');
    const text = toWireInput({ name: 's', datatype: 'BYTES', shape: [2], data: ['a"b', 'é'] });
    assert.equal(toJsonData(text), '["a\\"b","é"]');
  });

  it('BAD CALL - refuses non-UTF-8 BYTES and non-finite floats in JSON', () => {
    const raw = toWireInput({ name: 's', datatype: 'BYTES', shape: [1], data: [new Uint8Array([0xff])] });
    assert.throws(() => toJsonData(raw), /not UTF-8; send it with binary: true/);
    const nan = toWireInput({ name: 'f', datatype: 'FP32', shape: [1], data: Float32Array.of(NaN) });
    assert.throws(() => toJsonData(nan), /no JSON form/);
  });

  it('reads JSON data into typed arrays: nested, FP16 as bits, null as NaN', () => {
    assert.deepEqual(
      Array.from(
        fromJsonData(
          'o',
          'INT32',
          [2, 2],
          [
            [1, 2],
            [3, 4],
          ],
        ) as Int32Array,
      ),
      [1, 2, 3, 4],
    );
    const half = fromJsonData('o', 'FP16', [3], [1, -2, 65504]) as Uint16Array;
    assert.deepEqual(Array.from(half), [0x3c00, 0xc000, 0x7bff]);
    const bf16 = fromJsonData('o', 'BF16', [1], [1]) as Uint16Array;
    assert.equal(bf16[0], 0x3f80);
    assert.ok(Number.isNaN((fromJsonData('o', 'FP32', [1], [null]) as Float32Array)[0]));
    assert.deepEqual(fromJsonData('o', 'INT64', [1], [5]), BigInt64Array.of(5n));
    assert.throws(() => fromJsonData('o', 'INT32', [3], [1, 2]), /needs 3 elements, got 2/);
  });
});

describe('client HTTP infer codec', () => {
  it('lays out a binary request: JSON header, then blobs in input order', () => {
    const inputs = [
      toWireInput({ name: 'A', datatype: 'INT32', shape: [2], data: Int32Array.of(1, 2) }),
      toWireInput({ name: 'S', datatype: 'BYTES', shape: [1], data: ['xy'] }),
    ];
    const { body, headers } = encodeInferRequest(inputs, { binary: true, id: 'r', outputs: [{ name: 'O' }] });
    const n = Number(headers['Inference-Header-Content-Length']);
    assert.equal(headers['Content-Type'], 'application/octet-stream');
    const json = JSON.parse(new TextDecoder().decode(body.subarray(0, n)));
    assert.equal(json.id, 'r');
    assert.deepEqual(json.inputs[0].parameters, { binary_data_size: 8 });
    assert.deepEqual(json.inputs[1].parameters, { binary_data_size: 6 });
    assert.deepEqual(json.outputs, [{ name: 'O', parameters: { binary_data: true } }]);
    assert.deepEqual(Array.from(body.subarray(n)), [1, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 120, 121]);
  });

  it('sends JSON with binary: false, but FP16 still as a blob (Triton refuses FP16 in JSON)', () => {
    const plain = encodeInferRequest(
      [toWireInput({ name: 'A', datatype: 'INT32', shape: [1], data: Int32Array.of(7) })],
      {
        binary: false,
        parameters: { big: 2n ** 60n, flag: true },
      },
    );
    assert.equal(plain.headers['Content-Type'], 'application/json');
    const text = new TextDecoder().decode(plain.body);
    assert.match(text, /"big":1152921504606846976/);
    assert.match(text, /"data":\[7\]/);
    const half = encodeInferRequest(
      [toWireInput({ name: 'H', datatype: 'FP16', shape: [1], data: Uint16Array.of(1) })],
      {
        binary: false,
      },
    );
    assert.ok(half.headers['Inference-Header-Content-Length'] !== undefined);
  });

  it('asks for classification with the classification parameter', () => {
    const { body } = encodeInferRequest([], { binary: false, outputs: [{ name: 'P', classCount: 3 }] });
    const json = JSON.parse(new TextDecoder().decode(body));
    assert.deepEqual(json.outputs, [{ name: 'P', parameters: { classification: 3 } }]);
  });

  it('decodes a mixed response: binary and JSON outputs, unaligned blobs', () => {
    const header = utf8.encode(
      JSON.stringify({
        model_name: 'm',
        model_version: '1',
        outputs: [
          { name: 'B', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } },
          { name: 'J', datatype: 'BOOL', shape: [2], data: [true, false] },
          { name: 'S', datatype: 'BYTES', shape: [1], parameters: { binary_data_size: 7 } },
        ],
      }),
    );
    const floats = new Uint8Array(Float32Array.of(1.5, -2).buffer);
    const body = new Uint8Array([...header, ...floats, ...encodeBytesTensor(['abc'])]);
    const result = decodeInferResponse(body, header.byteLength);
    assert.deepEqual(Array.from(result.output('B').data as Float32Array), [1.5, -2]);
    assert.deepEqual(Array.from(result.output('J').data as Uint8Array), [1, 0]);
    assert.deepEqual(result.strings('S'), ['abc']);
    assert.equal(result.id, undefined);
    assert.equal(result.output('B').parameters, undefined);
  });

  it('BAD REPLY - a blob running past the body is an InternalError', () => {
    const header = utf8.encode(
      JSON.stringify({
        model_name: 'm',
        model_version: '1',
        outputs: [{ name: 'B', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } }],
      }),
    );
    assert.throws(() => decodeInferResponse(header, header.byteLength), InternalError);
  });
});

describe('client gRPC infer codec', () => {
  it('sends raw contents, parameters by type, classification as int64_param', () => {
    const msg = encodeModelInferRequest(
      'm',
      [toWireInput({ name: 'A', datatype: 'INT32', shape: [2], data: Int32Array.of(1, 2) })],
      { parameters: { n: 3, x: 0.5, s: 'v', b: true, big: 2n ** 62n }, outputs: [{ name: 'P', classCount: 2 }] },
    );
    assert.deepEqual(msg.parameters, {
      n: { int64_param: 3 },
      x: { double_param: 0.5 },
      s: { string_param: 'v' },
      b: { bool_param: true },
      big: { int64_param: '4611686018427387904' },
    });
    assert.deepEqual(msg.outputs, [{ name: 'P', parameters: { classification: { int64_param: 2 } } }]);
    assert.deepEqual(Array.from((msg.raw_input_contents as Uint8Array[])[0]), [1, 0, 0, 0, 2, 0, 0, 0]);
  });

  it('reads raw outputs, typed contents when there are no raw ones, and the set parameter member', () => {
    const result = decodeModelInferResponse({
      model_name: 'm',
      model_version: '1',
      id: '',
      parameters: { seq: { int64_param: 7 }, done: { bool_param: true } },
      outputs: [
        { name: 'R', datatype: 'INT32', shape: [1], contents: null },
        { name: 'T', datatype: 'INT64', shape: [2], contents: { int64_contents: ['5', '-6'] } },
      ],
      raw_output_contents: [new Uint8Array(Int32Array.of(9).buffer)],
    });
    assert.deepEqual(result.parameters, { seq: 7, done: true });
    assert.equal(result.id, undefined);
    assert.deepEqual(Array.from(result.output('R').data as Int32Array), [9]);
    assert.deepEqual(result.output('T').data, BigInt64Array.of(5n, -6n));
  });
});

describe('client error mapping', () => {
  it('maps HTTP statuses to the catalogue, keeping the message', () => {
    const cases: [number, new (m: string) => Error][] = [
      [400, InvalidArgError],
      [404, NotFoundError],
      [405, InvalidArgError],
      [500, InternalError],
      [501, UnsupportedError],
      [503, UnavailableError],
      [502, UnknownError],
    ];
    for (const [status, cls] of cases) {
      const err = errorFromHttp(status, `message ${status}`);
      assert.ok(err instanceof cls, `${status} → ${cls.name}`);
      assert.equal(err.message, `message ${status}`);
    }
  });

  it('maps gRPC codes to the catalogue, keeping the details', () => {
    const cases: [number, new (m: string) => Error][] = [
      [1, CancelledError],
      [2, UnknownError],
      [3, InvalidArgError],
      [4, CancelledError],
      [5, NotFoundError],
      [6, AlreadyExistsError],
      [12, UnsupportedError],
      [13, InternalError],
      [14, UnavailableError],
      [16, UnknownError],
    ];
    for (const [code, cls] of cases) {
      const err = errorFromGrpc(code, 'details');
      assert.ok(err instanceof cls, `${code} → ${cls.name}`);
      assert.equal(err.message, 'details');
    }
  });
});

describe('client call signal', () => {
  it('follows the caller signal and releases its listener', () => {
    const outer = new AbortController();
    const call = callSignal(outer.signal, undefined);
    outer.abort('why');
    assert.equal(call.signal.aborted, true);
    assert.equal(call.signal.reason, 'why');
    call.dispose();
  });

  it('aborts with a TimeoutError reason after timeoutMs', async () => {
    const call = callSignal(undefined, 5);
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(call.signal.aborted, true);
    assert.equal((call.signal.reason as Error).name, 'TimeoutError');
    call.dispose();
  });

  it('does not abort once disposed', async () => {
    const call = callSignal(undefined, 5);
    call.dispose();
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(call.signal.aborted, false);
  });
});
