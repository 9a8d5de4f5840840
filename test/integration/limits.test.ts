import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { writeFillModel } from '../fixtures/fill-model.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * Hard limits on what a request may make the server spend, each checked before memory is spent, and each a
 * regression test of a defect found by probing: a JSON output of a client-chosen size that killed the process,
 * BYTES shapes that allocated or threw before the data was checked, deep JSON. The transport's limits are in
 * limits-grpc.test.ts (messages, streams, metadata) and limits-http-connections.test.ts (slow and flooding
 * clients, keep-alive connections during a shutdown).
 */

const fillRequest = (n: number, binary: boolean): string =>
  JSON.stringify({
    inputs: [{ name: 'SHAPE', shape: [1], datatype: 'INT64', data: [n] }],
    outputs: [{ name: 'OUT', parameters: { binary_data: binary } }],
  });

const post = (url: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: 'POST', body, headers });

describe('Response size limit (--max-response-bytes)', () => {
  let s: TestServer;
  let repo: string;
  const LIMIT = 16 * 1024 * 1024;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-limits-'));
    await writeFillModel(repo);
    s = await startNereid({ repositories: [repo, EXAMPLES], maxResponseBytes: LIMIT });
  });
  after(async () => {
    await s.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('REGRESSION one request kills the server - a huge JSON output is a 400 with a message, the server lives', async () => {
    const started = Date.now();
    const res = await post(`${s.url}/v2/models/fill/infer`, fillRequest(32 * 1024 * 1024, false));
    assert.equal(res.status, 400);
    assert.match(
      ((await res.json()) as { error: string }).error,
      /the response would be at least \d+ bytes, more than the maximum response size of 16777216 bytes \(--max-response-bytes\)/,
    );
    // Refused from the output's size before encoding (~0.2 s; encoding 32 Mi numbers as JSON took minutes, or killed
    // the process): a bound two orders of magnitude above normal, which load does not reach.
    assert.ok(Date.now() - started < 20_000, 'refused before encoding');
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });

  it('BAD CALL - the same output as binary is refused by its exact size; smaller ones are served', async () => {
    const big = await post(`${s.url}/v2/models/fill/infer`, fillRequest(8 * 1024 * 1024, true));
    assert.equal(big.status, 400);
    assert.match(((await big.json()) as { error: string }).error, /at least 33554432 bytes/);
    const ok = await post(`${s.url}/v2/models/fill/infer`, fillRequest(1024 * 1024, true));
    assert.equal(ok.status, 200);
    assert.equal((await ok.arrayBuffer()).byteLength > 4 * 1024 * 1024, true);
    const json = await post(`${s.url}/v2/models/fill/infer`, fillRequest(300_000, false));
    assert.equal(json.status, 200);
    const body = (await json.json()) as { outputs: { data: number[] }[] };
    assert.equal(body.outputs[0].data.length, 300_000);
    assert.equal(body.outputs[0].data[299_999], 0.5);
  });

  it('BAD CALL - gRPC: a response over the limit is INVALID_ARGUMENT before it is encoded', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const shape = Buffer.alloc(8);
      shape.writeBigInt64LE(8n * 1024n * 1024n);
      const req = {
        model_name: 'fill',
        inputs: [{ name: 'SHAPE', datatype: 'INT64', shape: [1] }],
        raw_input_contents: [shape],
      };
      await assert.rejects(callUnary(client, 'ModelInfer', req), (err: grpc.ServiceError) => {
        assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
        assert.match(err.details, /more than the maximum response size of 16777216 bytes/);
        return true;
      });
    } finally {
      client.close();
    }
  });
});

describe('Element counts and JSON depth', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ modelControlMode: 'explicit', loadModels: ['simple'] });
  });
  after(() => s.close());

  const bytesRequest = (shape: number[], blob: Uint8Array): [string, Uint8Array] => {
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'INPUT0', shape, datatype: 'BYTES', parameters: { binary_data_size: blob.byteLength } }],
      }),
    );
    return [String(header.byteLength), Buffer.concat([header, blob])];
  };

  it('REGRESSION BYTES shape [1, 33000000] in a 200-byte request - refused before anything is allocated', async () => {
    for (const shape of [[1, 33_000_000], [4_294_967_296], [65536, 65536]]) {
      const [len, body] = bytesRequest(shape, Buffer.from([1, 0, 0, 0, 65]));
      const res = await post(`${s.url}/v2/models/simple/infer`, body, { 'Inference-Header-Content-Length': len });
      assert.equal(res.status, 400, JSON.stringify(shape));
      assert.match(((await res.json()) as { error: string }).error, /string elements|has \d+ elements/);
    }
  });

  it('REGRESSION shapes of 2^32 elements and more - 400 over gRPC too, never "Invalid array length"', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      for (const datatype of ['BYTES', 'INT32']) {
        const req = {
          model_name: 'simple',
          inputs: [{ name: 'INPUT0', datatype, shape: ['4294967296'] }],
          raw_input_contents: [Buffer.from([1, 0, 0, 0, 65])],
        };
        await assert.rejects(callUnary(client, 'ModelInfer', req), (err: grpc.ServiceError) => {
          assert.equal(err.code, grpc.status.INVALID_ARGUMENT, err.details);
          assert.doesNotMatch(err.details, /Invalid array length/);
          return true;
        });
      }
    } finally {
      client.close();
    }
  });

  it('REGRESSION a lone surrogate echoed in a gRPC error ended the process (found by the fuzz run)', async () => {
    // A JSON escape in a load request's config is the way a lone surrogate reaches an error message.
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const config = { string_param: '{"\\ud800": 1, "name": "simple"}' };
      await assert.rejects(
        callUnary(client, 'RepositoryModelLoad', { model_name: 'simple', parameters: { config } }),
        (err: grpc.ServiceError) => {
          assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
          assert.match(err.details, /\uFFFD/);
          return true;
        },
      );
      assert.ok(await callUnary(client, 'ServerLive', {}), 'the server lives');
    } finally {
      client.close();
    }
  });

  it('BAD CALL - gRPC bytes that are not protobuf are INVALID_ARGUMENT (grpc-js alone would say INTERNAL)', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      for (const rpc of ['ModelInfer', 'ModelMetadata']) {
        const err = await new Promise<grpc.ServiceError | null>((resolve) =>
          client.makeUnaryRequest(
            `/inference.GRPCInferenceService/${rpc}`,
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.from([0x3a, 0x03, 0x01]), // a length-delimited field running past the message
            resolve,
          ),
        );
        assert.equal(err?.code, grpc.status.INVALID_ARGUMENT, rpc);
        assert.match(err?.details ?? '', /failed to parse the request message/);
      }
    } finally {
      client.close();
    }
  });

  it('REGRESSION JSON nested 100k levels - 400 everywhere, not 500 "Maximum call stack size exceeded"', async () => {
    const deepObj = (n: number): string => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
    const deepArr = (n: number): string => '['.repeat(n) + '1' + ']'.repeat(n);
    const cases: [string, string][] = [
      ['/v2/logging', `{"log_info":${deepObj(100_000)}}`],
      ['/v2/trace/setting', `{"trace_rate":${deepObj(100_000)}}`],
      ['/v2/repository/index', deepArr(250_000)],
      ['/v2/repository/models/simple/load', JSON.stringify({ parameters: { config: deepObj(100_000) } })],
      [
        '/v2/repository/models/simple/load',
        JSON.stringify({ parameters: { config: `{"input":${deepArr(100_000)}}` } }),
      ],
      [
        '/v2/models/simple/infer',
        `{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"INT32","data":${deepArr(100_000)}}]}`,
      ],
    ];
    for (const [path, body] of cases) {
      const res = await post(s.url + path, body);
      assert.equal(res.status, 400, path);
      const msg = ((await res.json()) as { error: string }).error;
      assert.match(msg, /JSON nesting depth exceeds maximum allowed limit \(100\)/, path);
    }
    assert.equal((await fetch(`${s.url}/v2/models/simple/ready`)).status, 200);
  });
});
