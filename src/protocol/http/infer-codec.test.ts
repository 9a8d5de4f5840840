import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NereidError } from '../../core/errors.js';
import { encodeBytes } from '../../core/tensor.js';
import { decodeInferRequest, decodeRawRequest, parseHeaderLength } from './infer-request.js';
import { tensorDataToJson } from '../kserve/json-tensor.js';
import { encodeInferResponse, parametersToJson } from './infer-response.js';

const fails = (code: string, re: RegExp) => (err: unknown) =>
  err instanceof NereidError && err.code === code && re.test(err.message);

const withBlobs = (header: unknown, ...blobs: Uint8Array[]) => {
  const h = Buffer.from(JSON.stringify(header));
  const body = new Uint8Array(Buffer.concat([h, ...blobs]));
  return { body, headerLength: h.length };
};

describe('parseHeaderLength', () => {
  it('accepts 0..body length and no header', () => {
    assert.equal(parseHeaderLength(undefined, 10), undefined);
    assert.equal(parseHeaderLength('0', 10), 0);
    assert.equal(parseHeaderLength(' 10 ', 10), 10);
  });
  it('BAD CALL - rejects non-numeric, out-of-int32 and out-of-body values', () => {
    assert.throws(
      () => parseHeaderLength('1e3', 10),
      fails('INVALID_ARG', /Unable to parse Inference-Header-Content-Length, got: 1e3/),
    );
    assert.throws(() => parseHeaderLength('99999999999', 10), fails('INVALID_ARG', /out of range/));
    assert.throws(() => parseHeaderLength('-1', 10), fails('INVALID_ARG', /should be in range \[0, 10\], got: -1/));
    assert.throws(() => parseHeaderLength('11', 10), fails('INVALID_ARG', /should be in range/));
  });
});

describe('decodeInferRequest', () => {
  it('decodes JSON inputs, parameters, outputs and the binary plan', () => {
    const body = Buffer.from(
      JSON.stringify({
        id: 'x',
        parameters: { binary_data_output: true, priority: 2, sequence_id: 'abc' },
        inputs: [{ name: 'A', datatype: 'FP32', shape: [2], data: [1, 2], parameters: { note: 'n' } }],
        outputs: [{ name: 'P', parameters: { classification: 3, binary_data: false } }, { name: 'Q' }],
      }),
    );
    const { request, plan } = decodeInferRequest('m', '1', new Uint8Array(body), undefined);
    assert.equal(request.id, 'x');
    assert.deepEqual(request.parameters, { priority: 2, sequence_id: 'abc' });
    assert.deepEqual(request.inputs[0].data, Float32Array.from([1, 2]));
    assert.deepEqual(request.inputs[0].parameters, { note: 'n' });
    assert.deepEqual(request.outputs, [{ name: 'P', classCount: 3 }, { name: 'Q' }]);
    assert.equal(plan.binaryDefault, true);
    assert.equal(plan.binary.get('P'), false);
    assert.equal(plan.binary.get('Q'), true);
  });

  it('views binary blobs in order, without copying aligned data', () => {
    const a = Buffer.from(Int32Array.from([1, 2]).buffer);
    const s = encodeBytes([Buffer.from('hi'), Buffer.from('')]);
    const header = {
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [2], parameters: { binary_data_size: 8 } },
        { name: 'S', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: s.byteLength } },
      ],
    };
    const { body, headerLength } = withBlobs(header, a, s);
    const { request } = decodeInferRequest('m', undefined, body, headerLength);
    assert.deepEqual(Array.from(request.inputs[0].data as Int32Array), [1, 2]);
    assert.deepEqual(
      (request.inputs[1].data as Uint8Array[]).map((e) => Buffer.from(e).toString()),
      ['hi', ''],
    );
    assert.equal(request.inputs[1].parameters, undefined, 'binary_data_size is consumed');
  });

  it('BAD CALL - rejects blob size mismatches, overruns and leftovers', () => {
    const header = (n: number) => ({
      inputs: [{ name: 'A', datatype: 'INT32', shape: [2], parameters: { binary_data_size: n } }],
    });
    let r = withBlobs(header(8), new Uint8Array(4));
    assert.throws(
      () => decodeInferRequest('m', undefined, r.body, r.headerLength),
      fails('INVALID_ARG', /unexpected size for input 'A', expecting 8 additional bytes for model 'm'/),
    );
    r = withBlobs(header(8), new Uint8Array(9));
    assert.throws(
      () => decodeInferRequest('m', undefined, r.body, r.headerLength),
      fails('INVALID_ARG', /unexpected additional input data for model 'm'/),
    );
    r = withBlobs(header(4), new Uint8Array(4));
    assert.throws(
      () => decodeInferRequest('m', undefined, r.body, r.headerLength),
      fails('INVALID_ARG', /input byte size mismatch for input 'A' for model 'm'. Expected 8, got 4/),
    );
  });

  it('BAD CALL - rejects duplicate inputs, bad parameters and malformed shared-memory parameters', () => {
    const dec = (doc: unknown) => () =>
      decodeInferRequest('m', undefined, new Uint8Array(Buffer.from(JSON.stringify(doc))), undefined);
    const inp = { name: 'A', datatype: 'INT32', shape: [1], data: [1] };
    assert.throws(dec({ inputs: [inp, inp] }), fails('INVALID_ARG', /input 'A' already exists in request/));
    assert.throws(
      dec({ inputs: [inp], parameters: { x: { y: 1 } } }),
      fails('INVALID_ARG', /parameter 'x' .* must be a string, number or boolean, got object/),
    );
    assert.throws(
      dec({ inputs: [inp], parameters: { binary_data_output: 'yes' } }),
      fails('INVALID_ARG', /must be a boolean/),
    );
    assert.throws(
      dec({ inputs: [inp], outputs: [{ name: 'O', parameters: { classification: -1 } }] }),
      fails('INVALID_ARG', /non-negative integer/),
    );
    assert.throws(
      dec({ inputs: [{ ...inp, parameters: { shared_memory_region: 'r' } }] }),
      fails('INVALID_ARG', /Input must set only one of the following fields: .* But set 'data' 'shared_memory_region'/),
    );
    assert.throws(
      dec({
        inputs: [{ ...inp, data: undefined, parameters: { shared_memory_region: 'r', shared_memory_offset: -1 } }],
      }),
      fails('INVALID_ARG', /Unable to parse 'shared_memory_offset'/),
    );
    // A region with a 64-bit offset and size is kept exact, for the server's bounds checks.
    const ok = dec({
      inputs: [{ ...inp, data: undefined, parameters: { shared_memory_region: 'r', shared_memory_byte_size: 4 } }],
      outputs: [
        { name: 'O', parameters: { shared_memory_region: 'o', shared_memory_offset: 8, shared_memory_byte_size: 4 } },
      ],
    })();
    assert.deepEqual(ok.request.inputs[0].sharedMemory, { region: 'r', offset: 0n, byteSize: 4n });
    assert.deepEqual(ok.request.outputs?.[0].sharedMemory, { region: 'o', offset: 8n, byteSize: 4n });
  });
});

describe('decodeRawRequest', () => {
  const meta = (datatype: 'FP32' | 'BYTES', shape: number[], maxBatchSize = 0) => ({
    maxBatchSize,
    inputs: [{ name: 'IN', datatype, shape }],
  });
  it('treats the body as the only input, batch 1, every output binary', () => {
    const body = new Uint8Array(Float32Array.from([1, 2, 3, 4]).buffer);
    const { request, plan } = decodeRawRequest('m', undefined, body, meta('FP32', [-1, -1], 8));
    assert.deepEqual(request.inputs[0].shape, [1, 4]);
    assert.equal(plan.binaryDefault, true);
    const bytes = decodeRawRequest('m', undefined, new Uint8Array([104, 105]), meta('BYTES', [1]));
    assert.deepEqual(bytes.request.inputs[0].shape, [1]);
  });
  it('BAD CALL - refuses models it cannot deduce the input of', () => {
    const two = {
      ...meta('FP32', [4]),
      inputs: [meta('FP32', [4]).inputs[0], { name: 'B', datatype: 'FP32' as const, shape: [4] }],
    };
    assert.throws(
      () => decodeRawRequest('m', undefined, new Uint8Array(16), two),
      fails('INVALID_ARG', /Raw request must only have 1 input/),
    );
    assert.throws(
      () => decodeRawRequest('m', undefined, new Uint8Array(12), meta('FP32', [4])),
      fails('INVALID_ARG', /byte size mismatch/),
    );
    assert.throws(
      () => decodeRawRequest('m', undefined, new Uint8Array(4), meta('BYTES', [2])),
      fails('INVALID_ARG', /must have input shape \[1\]/),
    );
    assert.throws(
      () => decodeRawRequest('m', undefined, new Uint8Array(8), meta('FP32', [-1, -1])),
      fails(
        'INVALID_ARG',
        /^The shape of the raw input 'IN' can not be deduced because there are more than one variable-sized dimension$/,
      ),
    );
  });
  it('BAD CALL - refuses a raw BYTES body for a variable dim ([-1], with or without batching), as Triton does', () => {
    for (const m of [meta('BYTES', [-1]), meta('BYTES', [-1, -1], 4), meta('BYTES', [1, -1])]) {
      assert.throws(
        () => decodeRawRequest('m', undefined, new Uint8Array([1, 2]), m),
        fails('INVALID_ARG', /^For BYTE datatype raw input 'IN', the model must have input shape \[1\]$/),
      );
    }
  });
  it('takes a raw BYTES body as the one element wherever the dims hold exactly one ([1], [1,1], [])', () => {
    const body = new Uint8Array([0xff, 0]);
    for (const [m, shape] of [
      [meta('BYTES', [1, 1]), [1, 1]],
      [meta('BYTES', []), []],
      [meta('BYTES', [-1, 1], 4), [1, 1]],
    ] as const) {
      const { request } = decodeRawRequest('m', undefined, body, m);
      assert.deepEqual(request.inputs[0].shape, shape);
      assert.deepEqual(request.inputs[0].data, [body]);
    }
  });
});

describe('encodeInferResponse', () => {
  const response = {
    model: 'm',
    version: '1',
    id: 'r1',
    parameters: { big: 2n ** 60n, s: 'x' },
    outputs: [
      { name: 'A', datatype: 'INT64' as const, shape: [2], data: BigInt64Array.from([1n, 2n ** 62n]) },
      { name: 'S', datatype: 'BYTES' as const, shape: [1], data: [Buffer.from('hé')] },
    ],
  };
  it('writes JSON outputs with exact integers and the request id', async () => {
    const enc = await encodeInferResponse(response, { binaryDefault: false, binary: new Map() });
    assert.equal(enc.headerLength, undefined);
    const text = Buffer.concat(enc.header).toString();
    assert.match(text, /"data":\[1,4611686018427387904\]/);
    assert.match(text, /"parameters":\{"big":1152921504606846976,"s":"x"\}/);
    assert.equal(JSON.parse(text).id, 'r1');
    assert.deepEqual(JSON.parse(text).outputs[1].data, ['hé']);
  });
  it('appends binary blobs in output order with binary_data_size', async () => {
    const enc = await encodeInferResponse(response, {
      binaryDefault: false,
      binary: new Map([
        ['A', true],
        ['S', true],
      ]),
    });
    const header = Buffer.concat(enc.header);
    assert.equal(enc.headerLength, header.length);
    const json = JSON.parse(header.toString());
    assert.equal(json.outputs[0].parameters.binary_data_size, 16);
    assert.equal(json.outputs[1].parameters.binary_data_size, 4 + 3);
    assert.equal(enc.blobs[0].buffer, (response.outputs[0].data as BigInt64Array).buffer, 'fixed-size blobs are views');
    assert.deepEqual(Array.from(enc.blobs[1]), [3, 0, 0, 0, 0x68, 0xc3, 0xa9]);
  });
  it('writes large JSON outputs in chunks that join to the same text as the one-piece encoder', async () => {
    const data = Float32Array.from({ length: 200_000 }, (_, i) => (i % 7 === 0 ? NaN : i / 3));
    const t = { name: 'F', datatype: 'FP32' as const, shape: [data.length], data };
    const enc = await encodeInferResponse(
      { model: 'm', version: '1', outputs: [t] },
      { binaryDefault: false, binary: new Map() },
    );
    assert.ok(enc.header.length > 3, 'several chunks');
    const json = JSON.parse(Buffer.concat(enc.header).toString()) as { outputs: { data: (number | null)[] }[] };
    assert.equal(JSON.stringify(json.outputs[0].data), tensorDataToJson(t));
  });
  it('BAD CALL - a response over the limit is refused before encoding: JSON by its lower bound, binary exactly', async () => {
    const data = new Int32Array(1000);
    const out = { model: 'm', version: '1', outputs: [{ name: 'I', datatype: 'INT32' as const, shape: [1000], data }] };
    // JSON needs at least 2 bytes per element; binary exactly 4.
    await assert.rejects(
      encodeInferResponse(out, { binaryDefault: false, binary: new Map() }, 1999),
      /at least 2001 bytes, more than the maximum response size of 1999 bytes \(--max-response-bytes\)/,
    );
    await assert.rejects(
      encodeInferResponse(out, { binaryDefault: true, binary: new Map() }, 3999),
      /at least 4000 bytes/,
    );
    // Under the lower bound but over the limit once written: refused during encoding, never beyond the budget.
    const wide = { ...out, outputs: [{ ...out.outputs[0], data: new Int32Array(1000).fill(123456) }] };
    await assert.rejects(
      encodeInferResponse(wide, { binaryDefault: false, binary: new Map() }, 5000),
      /InvalidArg|maximum response size/,
    );
    const ok = await encodeInferResponse(out, { binaryDefault: true, binary: new Map() }, 4200);
    assert.equal(ok.blobs[0].byteLength, 4000);
  });
  it('BAD CALL - a large JSON output clearly over the limit is refused by its sampled estimate, before encoding', async () => {
    const data = new Float32Array(100_000).fill(0.123456789); // ~20 bytes of JSON per element
    const out = {
      model: 'm',
      version: '1',
      outputs: [{ name: 'F', datatype: 'FP32' as const, shape: [data.length], data }],
    };
    await assert.rejects(
      encodeInferResponse(out, { binaryDefault: false, binary: new Map() }, 1_000_000),
      /the response would be about 20\d{5} bytes/,
    );
  });
  it('parametersToJson prints bigint exactly', () => {
    assert.equal(parametersToJson({ a: 2n ** 64n - 1n, b: true }), '{"a":18446744073709551615,"b":true}');
  });
});
