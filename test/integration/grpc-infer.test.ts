import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import {
  fp32Bytes,
  fp32Of,
  inferenceClient,
  int32Bytes,
  int32Of,
  simpleRaw,
  startGrpcNereid,
  type GrpcNereid,
} from '../helpers/grpc.js';

/** Black-box: ModelInfer and ModelStreamInfer good paths over real gRPC. */

interface Output {
  name: string;
  datatype: string;
  shape: string[];
}
interface InferResponse {
  model_name: string;
  model_version: string;
  id: string;
  outputs: Output[];
  raw_output_contents: Buffer[];
}
interface StreamResponse {
  error_message: string;
  infer_response: InferResponse | null;
}

const range16 = [...Array(16).keys()];
const ones16: number[] = Array(16).fill(1);

/** Splits BYTES wire form (4-byte LE length prefixes) into strings. */
function strings(buf: Buffer): string[] {
  const out: string[] = [];
  for (let off = 0; off < buf.length;) {
    const len = buf.readUInt32LE(off);
    out.push(buf.subarray(off + 4, off + 4 + len).toString());
    off += 4 + len;
  }
  return out;
}

describe('gRPC ModelInfer', () => {
  let n: GrpcNereid;
  before(async () => {
    n = await startGrpcNereid();
  });
  after(async () => {
    await n.close();
  });

  it('runs simple with raw contents and answers raw_output_contents', async () => {
    const res = await n.unary<InferResponse>('ModelInfer', simpleRaw());
    assert.equal(res.model_name, 'simple');
    assert.equal(res.model_version, '1');
    assert.deepEqual(
      res.outputs.map((o) => [o.name, o.datatype, o.shape]),
      [
        ['OUTPUT0', 'INT32', ['1', '16']],
        ['OUTPUT1', 'INT32', ['1', '16']],
      ],
    );
    assert.deepEqual(
      int32Of(res.raw_output_contents[0]),
      range16.map((x) => x + 1),
    );
    assert.deepEqual(
      int32Of(res.raw_output_contents[1]),
      range16.map((x) => x - 1),
    );
  });

  it('runs simple with typed int_contents, batch 2, and echoes the request id', async () => {
    const a = [...range16, ...range16.map((x) => x * 10)];
    const b = Array(32).fill(2);
    const res = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'simple',
      model_version: '1',
      id: 'req-42',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [2, 16], contents: { int_contents: a } },
        { name: 'INPUT1', datatype: 'INT32', shape: [2, 16], contents: { int_contents: b } },
      ],
      outputs: [{ name: 'OUTPUT1' }],
    });
    assert.equal(res.id, 'req-42');
    assert.deepEqual(
      res.outputs.map((o) => o.name),
      ['OUTPUT1'],
    );
    assert.deepEqual(
      int32Of(res.raw_output_contents[0]),
      a.map((x) => x - 2),
    );
  });

  it('runs classifier with fp32 contents and raw contents alike', async () => {
    const x = [0.1, 0.5, -0.3, 0.9, 0.2, 0.0, -1.0, 0.7];
    const typed = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'classifier',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 8], contents: { fp32_contents: x } }],
    });
    const raw = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'classifier',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 8] }],
      raw_input_contents: [fp32Bytes(x)],
    });
    assert.deepEqual(typed.outputs[0], {
      name: 'PROBS',
      datatype: 'FP32',
      shape: ['1', '5'],
      parameters: {},
      contents: null,
    });
    const probs = fp32Of(typed.raw_output_contents[0]);
    assert.deepEqual(fp32Of(raw.raw_output_contents[0]), probs);
    assert.ok(Math.abs(probs.reduce((s, p) => s + p, 0) - 1) < 1e-4, 'softmax sums to 1');
  });

  it('classifies through the output parameter `classification` (int64_param)', async () => {
    const x = [0.1, 0.5, -0.3, 0.9, 0.2, 0.0, -1.0, 0.7];
    const plain = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'classifier',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 8] }],
      raw_input_contents: [fp32Bytes(x)],
    });
    const res = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'classifier',
      inputs: [{ name: 'INPUT', datatype: 'FP32', shape: [1, 8] }],
      outputs: [{ name: 'PROBS', parameters: { classification: { int64_param: 2 } } }],
      raw_input_contents: [fp32Bytes(x)],
    });
    assert.equal(res.outputs[0].datatype, 'BYTES');
    assert.deepEqual(res.outputs[0].shape, ['1', '2']);
    const probs = fp32Of(plain.raw_output_contents[0]);
    const best = probs.indexOf(Math.max(...probs));
    const top = strings(res.raw_output_contents[0]);
    assert.equal(top.length, 2);
    assert.match(top[0], new RegExp(`^[0-9.]+:${best}:\\w+$`));
  });

  it('runs text_encoder with variable dims [batch, seq] and answers [batch, seq, 64]', async () => {
    const ids = Array.from({ length: 2 * 7 }, (_, i) => (i * 13) % 100);
    const mask = Array(14).fill(1);
    const types = Array(14).fill(0);
    const res = await n.unary<InferResponse>('ModelInfer', {
      model_name: 'text_encoder',
      inputs: [
        { name: 'input_ids', datatype: 'INT32', shape: [2, 7] },
        { name: 'attention_mask', datatype: 'INT32', shape: [2, 7] },
        { name: 'token_type_ids', datatype: 'INT32', shape: [2, 7], contents: null },
      ],
      raw_input_contents: [int32Bytes(ids), int32Bytes(mask), int32Bytes(types)],
    });
    assert.deepEqual(res.outputs[0].shape, ['2', '7', '64']);
    assert.equal(res.raw_output_contents[0].length, 2 * 7 * 64 * 4);
  });

  it('takes request parameters of the three custom kinds (bool, int64, string)', async () => {
    const res = await n.unary<InferResponse>(
      'ModelInfer',
      simpleRaw({
        parameters: { a: { bool_param: true }, b: { int64_param: '9007199254740993' }, c: { string_param: 'x' } },
      }),
    );
    assert.deepEqual(int32Of(res.raw_output_contents[0]).slice(0, 2), [1, 2]);
  });

  it('takes gzip-compressed requests', async () => {
    const gz = inferenceClient(n.address, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': 2,
    });
    try {
      const res = await new Promise<InferResponse>((resolve, reject) =>
        (
          gz as unknown as Record<string, (r: object, cb: (e: Error | null, r: InferResponse) => void) => void>
        ).ModelInfer(simpleRaw(), (e, r) => (e ? reject(e) : resolve(r))),
      );
      assert.deepEqual(int32Of(res.raw_output_contents[0]).slice(0, 3), [1, 2, 3]);
    } finally {
      gz.close();
    }
  });

  it('takes a large request (16 MiB raw) beyond grpc-js default 4 MiB limit', async () => {
    // text_encoder at [64, 2048] INT32 is 512 KiB per input; a 16 MiB request needs a big unused payload,
    // so send the real tensors plus a request parameter string of 16 MiB (parameters are free-form).
    const big = 'x'.repeat(16 * 1024 * 1024);
    const res = await n.unary<InferResponse>('ModelInfer', simpleRaw({ parameters: { big: { string_param: big } } }));
    assert.equal(res.outputs.length, 2);
  });
});

describe('gRPC ModelStreamInfer', () => {
  let n: GrpcNereid;
  before(async () => {
    n = await startGrpcNereid();
  });
  after(async () => {
    await n.close();
  });

  function stream(): grpc.ClientDuplexStream<object, StreamResponse> {
    return (
      n.client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
    ).ModelStreamInfer();
  }

  function collect(call: grpc.ClientDuplexStream<object, StreamResponse>): Promise<StreamResponse[]> {
    const out: StreamResponse[] = [];
    return new Promise((resolve, reject) => {
      call.on('data', (r: StreamResponse) => out.push(r));
      call.on('error', reject);
      call.on('end', () => resolve(out));
    });
  }

  it('answers every request in order; a bad one answers error_message and the stream goes on', async () => {
    const call = stream();
    const done = collect(call);
    call.write(simpleRaw({ id: '1' }));
    call.write({
      model_name: 'simple',
      id: '2',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 15] }],
      raw_input_contents: [int32Bytes(Array(15).fill(0))],
    });
    call.write({ model_name: 'nope', id: '3' });
    call.write(simpleRaw({ id: '4', outputs: [{ name: 'OUTPUT0' }] }));
    call.end();
    const res = await done;
    assert.equal(res.length, 4);
    assert.equal(res[0].error_message, '');
    assert.equal(res[0].infer_response?.id, '1');
    assert.match(res[1].error_message, /unexpected shape for input 'INPUT0'/);
    assert.equal(res[1].infer_response, null);
    assert.match(res[2].error_message, /'nope'/);
    assert.equal(res[3].infer_response?.id, '4');
    assert.deepEqual(
      int32Of(res[3].infer_response?.raw_output_contents[0] as Buffer),
      ones16.map((_, i) => i + 1),
    );
  });

  it('keeps many concurrent stream requests in request order', async () => {
    const call = stream();
    const done = collect(call);
    for (let i = 0; i < 40; i++) call.write(simpleRaw({ id: String(i) }));
    call.end();
    const res = await done;
    assert.deepEqual(
      res.map((r) => r.infer_response?.id),
      Array.from({ length: 40 }, (_, i) => String(i)),
    );
  });

  it('ends the stream with the error status when the client sends triton_grpc_error: true', async () => {
    const md = new grpc.Metadata();
    md.set('triton_grpc_error', 'true');
    const call = (
      n.client as unknown as { ModelStreamInfer(md: grpc.Metadata): grpc.ClientDuplexStream<object, StreamResponse> }
    ).ModelStreamInfer(md);
    const got: StreamResponse[] = [];
    call.on('data', (r: StreamResponse) => got.push(r));
    const err = await new Promise<grpc.ServiceError>((resolve) => {
      call.on('error', resolve);
      call.write(simpleRaw({ id: 'a' }));
      call.write({ model_name: 'nope' });
    });
    assert.equal(err.code, grpc.status.NOT_FOUND);
    assert.equal(got.length, 1);
  });

  it('survives a client that disconnects mid-stream and serves the next one', async () => {
    const other = inferenceClient(n.address);
    const call = (
      other as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
    ).ModelStreamInfer();
    call.on('error', () => {});
    for (let i = 0; i < 20; i++) call.write(simpleRaw({ id: String(i) }));
    await new Promise((r) => setTimeout(r, 5));
    call.cancel();
    other.close();
    const again = stream();
    const done = collect(again);
    again.write(simpleRaw({ id: 'after' }));
    again.end();
    const res = await done;
    assert.equal(res[0].infer_response?.id, 'after');
    const unary = await n.unary<InferResponse>('ModelInfer', simpleRaw());
    assert.equal(unary.outputs.length, 2);
  });
});
