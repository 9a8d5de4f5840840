import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NereidError } from '../../core/errors.js';
import { decodeBytes, encodeBytes } from '../../core/tensor.js';
import {
  bytesElementToJson,
  flattenJsonData,
  jsonToTensorData,
  jsonValuesToTensorData,
  MAX_JSON_DEPTH,
  parseJson,
  tensorDataToJson,
} from './json-tensor.js';

const invalid = (re: RegExp) => (err: unknown) =>
  err instanceof NereidError && err.code === 'INVALID_ARG' && re.test(err.message);

describe('jsonToTensorData', () => {
  it('converts flat and nested data row-major', () => {
    assert.deepEqual(jsonToTensorData('X', 'INT32', [2, 2], [1, 2, 3, 4]), Int32Array.from([1, 2, 3, 4]));
    assert.deepEqual(
      jsonToTensorData(
        'X',
        'INT32',
        [2, 2],
        [
          [1, 2],
          [3, [4]],
        ],
      ),
      Int32Array.from([1, 2, 3, 4]),
    );
  });

  it('converts every fixed datatype', () => {
    assert.deepEqual(jsonToTensorData('X', 'BOOL', [2], [true, false]), Uint8Array.from([1, 0]));
    assert.deepEqual(jsonToTensorData('X', 'UINT8', [1], [255]), Uint8Array.from([255]));
    assert.deepEqual(jsonToTensorData('X', 'INT8', [1], [-128]), Int8Array.from([-128]));
    assert.deepEqual(jsonToTensorData('X', 'UINT16', [1], [65535]), Uint16Array.from([65535]));
    assert.deepEqual(jsonToTensorData('X', 'INT16', [1], [-1]), Int16Array.from([-1]));
    assert.deepEqual(jsonToTensorData('X', 'UINT32', [1], [4294967295]), Uint32Array.from([4294967295]));
    assert.deepEqual(
      jsonToTensorData('X', 'INT64', [2], [-5, '-9223372036854775808']),
      BigInt64Array.from([-5n, -(2n ** 63n)]),
    );
    assert.deepEqual(
      jsonToTensorData('X', 'UINT64', [1], ['18446744073709551615']),
      BigUint64Array.from([2n ** 64n - 1n]),
    );
    assert.deepEqual(jsonToTensorData('X', 'FP32', [2], [1.5, 2]), Float32Array.from([1.5, 2]));
    assert.deepEqual(jsonToTensorData('X', 'FP64', [1], [0.1]), Float64Array.from([0.1]));
    assert.deepEqual(jsonToTensorData('X', 'FP16', [2], [1, -2]), Uint16Array.from([0x3c00, 0xc000]));
    assert.deepEqual(jsonToTensorData('X', 'BF16', [1], [1]), Uint16Array.from([0x3f80]));
  });

  it('encodes BYTES as UTF-8 and round-trips through the wire form', () => {
    const data = jsonToTensorData('S', 'BYTES', [3], ['héllo', '', '漢字']) as Uint8Array[];
    assert.deepEqual(
      data.map((e) => new TextDecoder().decode(e)),
      ['héllo', '', '漢字'],
    );
    const wire = encodeBytes(data);
    assert.equal(wire.byteLength, 3 * 4 + 6 + 0 + 6);
    assert.deepEqual(decodeBytes(wire, 3, 'S'), data);
    assert.equal(tensorDataToJson({ name: 'S', datatype: 'BYTES', shape: [3], data }), '["héllo","","漢字"]');
  });

  it('BAD CALL - rejects too many or too few elements with the shape in the message', () => {
    assert.throws(
      () => jsonToTensorData('X', 'INT32', [2, 16], new Array(31).fill(0)),
      invalid(/unable to parse 'data' for input 'X': shape \[2,16\] needs 32 elements, got 31/),
    );
    assert.throws(() => jsonToTensorData('X', 'INT32', [1], [1, 2]), invalid(/needs 1 elements, got 2/));
  });

  it('BAD CALL - rejects nesting deeper than 100', () => {
    let data: unknown = [1];
    for (let i = 0; i < MAX_JSON_DEPTH; i++) data = [data];
    assert.throws(
      () => jsonToTensorData('X', 'INT32', [1], data),
      invalid(/JSON nesting depth exceeds maximum allowed limit \(100\)/),
    );
    let ok: unknown = [1];
    for (let i = 0; i < MAX_JSON_DEPTH - 1; i++) ok = [ok];
    assert.deepEqual(jsonToTensorData('X', 'INT32', [1], ok), Int32Array.from([1]));
  });

  it('BAD CALL - rejects wrong element types and out-of-range integers', () => {
    assert.throws(
      () => jsonToTensorData('X', 'INT32', [1], ['1']),
      invalid(/input 'X': expected a number, got string/),
    );
    assert.throws(() => jsonToTensorData('X', 'FP32', [1], [null]), invalid(/expected a number, got null/));
    assert.throws(() => jsonToTensorData('X', 'BOOL', [1], [1]), invalid(/expected a boolean, got number/));
    assert.throws(() => jsonToTensorData('X', 'BYTES', [1], [1]), invalid(/expected a string, got number/));
    assert.throws(() => jsonToTensorData('X', 'INT32', [1], [1.5]), invalid(/expected an integer, got 1.5/));
    assert.throws(() => jsonToTensorData('X', 'UINT8', [1], [256]), invalid(/value 256 is out of range for UINT8/));
    assert.throws(() => jsonToTensorData('X', 'UINT64', [1], [-1]), invalid(/out of range for UINT64/));
    assert.throws(() => jsonToTensorData('X', 'INT64', [1], ['2e3']), invalid(/expected a number, got string/));
    assert.throws(() => jsonToTensorData('X', 'INT32', [1], 5), invalid(/expected an array, got number/));
  });
});

describe('tensorDataToJson', () => {
  it('writes integers exactly, bools as booleans and half floats as numbers', () => {
    const big = BigInt64Array.from([2n ** 62n + 1n, -1n]);
    assert.equal(tensorDataToJson({ name: 'a', datatype: 'INT64', shape: [2], data: big }), '[4611686018427387905,-1]');
    assert.equal(
      tensorDataToJson({ name: 'a', datatype: 'BOOL', shape: [2], data: Uint8Array.from([1, 0]) }),
      '[true,false]',
    );
    assert.equal(
      tensorDataToJson({ name: 'a', datatype: 'FP16', shape: [2], data: Uint16Array.from([0x3c00, 0xc000]) }),
      '[1,-2]',
    );
    assert.equal(
      tensorDataToJson({ name: 'a', datatype: 'BF16', shape: [1], data: Uint16Array.from([0x3fc0]) }),
      '[1.5]',
    );
  });

  it('writes non-finite floats as null so the body stays valid JSON', () => {
    const data = Float32Array.from([NaN, Infinity, 1]);
    assert.equal(tensorDataToJson({ name: 'a', datatype: 'FP32', shape: [3], data }), '[null,null,1]');
  });
});

describe('parseJson', () => {
  it('parses ordinary JSON like JSON.parse', () => {
    assert.deepEqual(parseJson('{"a":[1,2.5,"x"]}'), { a: [1, 2.5, 'x'] });
  });
  it('accepts integers beyond 2^53 (exact where the runtime exposes JSON source text)', () => {
    const v = (parseJson('[9007199254740993]') as unknown[])[0];
    assert.ok(v === 9007199254740992 || v === 9007199254740993n);
  });
});

describe('jsonValuesToTensorData (the one JSON conversion of /infer and /generate)', () => {
  it('BAD CALL - refuses integers that would wrap or truncate, for every integer datatype', () => {
    assert.throws(
      () => jsonValuesToTensorData('X', 'INT32', [2 ** 40]),
      invalid(/value 1099511627776 is out of range for INT32/),
    );
    assert.throws(
      () => jsonValuesToTensorData('X', 'INT32', [1.9]),
      invalid(/input 'X': expected an integer, got 1.9/),
    );
    assert.throws(() => jsonValuesToTensorData('X', 'UINT8', [-1]), invalid(/value -1 is out of range for UINT8/));
    assert.throws(() => jsonValuesToTensorData('X', 'INT64', [0.5]), invalid(/expected an integer, got 0.5/));
    assert.throws(() => jsonValuesToTensorData('X', 'UINT64', [-1]), invalid(/value -1 is out of range for UINT64/));
  });

  it('flattenJsonData walks 10^5 levels without recursion and refuses past the limit', () => {
    let deep: unknown[] = [1];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    assert.throws(
      () => flattenJsonData('X', deep),
      invalid(/JSON nesting depth exceeds maximum allowed limit \(100\)/),
    );
    let ok: unknown[] = [7];
    for (let i = 1; i < MAX_JSON_DEPTH; i++) ok = [ok, 8];
    assert.equal(flattenJsonData('X', ok).length, MAX_JSON_DEPTH);
  });
});

describe('bytesElementToJson', () => {
  it('writes valid UTF-8 as its JSON string, a leading byte-order mark kept', () => {
    const text = '\uFEFFé ✓ 𝄞 "q"';
    assert.equal(bytesElementToJson('Y', 0, Buffer.from(text, 'utf8')), JSON.stringify(text));
  });

  it('BAD CALL - refuses bytes that are not UTF-8 instead of writing U+FFFD, naming output and element', () => {
    for (const bad of [[0xff], [0x61, 0xc3], [0xed, 0xa0, 0x80], [0xc0, 0x80]]) {
      assert.throws(
        () => bytesElementToJson('Y', 3, Uint8Array.from(bad)),
        invalid(/^Failed to encode output 'Y' using UTF-8: element 3 is not valid UTF-8.*binary_data=True/),
      );
    }
    const t = { name: 'Y', datatype: 'BYTES' as const, shape: [2], data: [Buffer.from('a'), Uint8Array.from([0xfe])] };
    assert.throws(() => tensorDataToJson(t), invalid(/element 1 is not valid UTF-8/));
  });
});
