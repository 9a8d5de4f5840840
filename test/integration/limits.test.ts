import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { connect as connectHttp2 } from 'node:http2';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { writeFillModel } from '../fixtures/fill-model.js';
import { callUnary, inferenceClient, simpleRaw } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * Hard limits, each checked before memory is spent, and each a regression test of a defect found by probing:
 * a JSON output of a client-chosen size that killed the process, BYTES shapes that allocated or threw before the
 * data was checked, gRPC messages inflating to gigabytes, a stream whose client never reads, stalled and flooding
 * HTTP clients, deep JSON, keep-alive connections during a shutdown, and a listener leaked per reload.
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

describe('gRPC limits', () => {
  let s: TestServer;
  let repo: string;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-limits-'));
    await writeFillModel(repo);
    s = await startNereid({
      repositories: [repo, EXAMPLES],
      grpcMaxInputSize: 4 * 1024 * 1024,
      grpcMaxResponsePoolSize: 4,
    });
  });
  after(async () => {
    await s.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('REGRESSION a gzip message inflating to gigabytes - refused once past the limit, not inflated', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': 2, // gzip
    });
    try {
      // 32 MiB of zeros compresses to ~32 KiB: the server stops inflating at 4 MiB.
      const req = simpleRaw({ parameters: { pad: { string_param: '\0'.repeat(32 * 1024 * 1024) } } });
      await assert.rejects(callUnary(client, 'ModelInfer', req), (err: grpc.ServiceError) => {
        assert.equal(err.code, grpc.status.RESOURCE_EXHAUSTED);
        assert.match(err.details, /decompresses to a size larger than 4194304/);
        return true;
      });
      const ok = await callUnary<{ outputs: unknown[] }>(client, 'ModelInfer', simpleRaw());
      assert.equal(ok.outputs.length, 2);
    } finally {
      client.close();
    }
  });

  it('REGRESSION unbounded buffers - a ModelStreamInfer client that never reads stops being read', async () => {
    // A raw HTTP/2 client that sends 200 requests on one stream and never reads: its receive window stays closed.
    const { Inference } = await import('../../src/protocol/grpc/proto.js').then((m) => m.loadServices());
    const serialize = (Inference.service as unknown as Record<string, { requestSerialize(v: object): Buffer }>)
      .ModelStreamInfer.requestSerialize;
    const shape = Buffer.alloc(8);
    shape.writeBigInt64LE(256n * 1024n); // 1 MiB per response
    const msg = serialize({
      model_name: 'fill',
      inputs: [{ name: 'SHAPE', datatype: 'INT64', shape: [1] }],
      raw_input_contents: [shape],
    });
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt32BE(msg.length, 1);
    msg.copy(frame, 5);
    const stats = async (): Promise<number> => {
      const r = await fetch(`${s.url}/v2/models/fill/stats`);
      return ((await r.json()) as { model_stats: { inference_count: number }[] }).model_stats[0].inference_count;
    };
    const before = await stats();
    const session = connectHttp2(`http://127.0.0.1:${s.grpcPort}`);
    session.on('error', () => undefined);
    const stream = session.request({
      ':method': 'POST',
      ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    stream.on('error', () => undefined);
    stream.pause();
    const sent = 200;
    for (let i = 0; i < sent; i++) stream.write(frame);
    await new Promise((r) => setTimeout(r, 1500));
    const ran = (await stats()) - before;
    // The pool (4) plus grpc-js's own write buffer (16 messages); without the pool all 200 ran (and 200 MiB stayed).
    assert.ok(ran > 0 && ran <= 24, `the server ran ${ran} of ${sent} requests for a client that reads nothing`);
    stream.close();
    session.destroy();
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });

  it('REGRESSION gRPC metadata of 256 KiB - fails at once, never waits for the deadline', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const md = new grpc.Metadata();
      md.set('x-big', 'a'.repeat(256 * 1024));
      // A hang ends at the deadline as DEADLINE_EXCEEDED; failing at once is any other code (no clock to read).
      await assert.rejects(
        callUnary(client, 'ServerLive', {}, { deadline: Date.now() + 20_000 }, md),
        (e: grpc.ServiceError) => {
          assert.notEqual(e.code, grpc.status.DEADLINE_EXCEEDED, `waited for the deadline: ${e.message}`);
          return true;
        },
      );
    } finally {
      client.close();
    }
    // tritonclient (C-core) hung here until its deadline; test/compat/test_grpc.py checks it fails fast.
  });
});

/** A raw TCP connection; resolves when connected. */
function rawConnect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => resolve(sock));
    sock.once('error', reject);
  });
}

function closed(sock: Socket): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    sock.on('data', (d: Buffer) => (data += d.toString()));
    sock.on('error', () => undefined);
    sock.on('close', () => resolve(data));
  });
}

describe('HTTP transport limits', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      httpMaxConnections: 6,
      httpHeadersTimeoutSecs: 1,
      httpRequestTimeoutSecs: 2,
    });
  });
  after(() => s.close());

  it('REGRESSION a stalled body - the request is cut (408) once the request timeout passes', async () => {
    const sock = await rawConnect(s.httpPort as number);
    const done = closed(sock);
    sock.write(
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 67108864\r\n\r\n{"inputs":',
    );
    const started = Date.now();
    const reply = await done;
    // Cut at the 2 s request timeout; Node's own default would be 300 s. 30 s: an order of magnitude above normal
    // (load cannot stretch a timer that far), still far below the default it guards against.
    assert.ok(Date.now() - started < 30_000, `cut after ${Date.now() - started} ms`);
    assert.match(reply, /^HTTP\/1\.1 408/);
  });

  it('BAD CALL - headers that never end are cut after the headers timeout', async () => {
    const sock = await rawConnect(s.httpPort as number);
    const done = closed(sock);
    sock.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: a');
    const started = Date.now();
    await done;
    // Cut at the 1 s headers timeout (Node checks it every second: ~2 s); Node's own default would be 60 s. 20 s: an
    // order of magnitude above normal, still below the default it guards against.
    assert.ok(Date.now() - started < 20_000, `cut after ${Date.now() - started} ms`);
  });

  it('BAD CALL - connections past --http-max-connections are closed as they arrive; the server goes on', async () => {
    const held = await Promise.all(Array.from({ length: 6 }, () => rawConnect(s.httpPort as number)));
    // Connected is not yet accepted: with front-end threads the kernel may hand the next connection to a thread
    // that accepts it before another thread has accepted its held ones. The cap counts accepted connections.
    await new Promise((r) => setTimeout(r, 100));
    const extra = await rawConnect(s.httpPort as number);
    const reply = await closed(extra);
    assert.equal(reply, '', 'closed without an answer');
    for (const h of held) h.destroy();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });
});

describe('Shutdown with open keep-alive connections', () => {
  it('REGRESSION requests on an open keep-alive connection after shutdown began - served (Triton), not 503', async () => {
    // The drain's idle grace is long (60 s) so that "it ended once the client closed" is told apart from "it ran
    // out" by a bound load cannot reach (below).
    const s = await startNereid({ allowGrpc: false, allowMetrics: false, httpDrainIdleMs: 60_000 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const other = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (
      path: string,
      via = agent,
    ): Promise<{ status: number; socket: unknown; connection: string | undefined }> =>
      new Promise((resolve, reject) => {
        const req = request(`${s.url}${path}`, { agent: via }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, socket: req.socket, connection: res.headers.connection }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    const first = await get('/v2/health/live');
    assert.equal(first.status, 200);
    assert.equal((await get('/v2/health/live', other)).status, 200);
    const closing = s.close();
    await new Promise((r) => setTimeout(r, 1000));
    // Readiness is false, but the open connection is still served, on the same socket; during the drain a response
    // closes its connection (Connection: close), so a client in a keep-alive loop cannot hold the drain open.
    const again = await get('/v2/models/simple');
    assert.equal(again.status, 200);
    assert.equal(again.socket, first.socket, 'the same keep-alive connection');
    assert.equal(again.connection, 'close');
    assert.equal((await get('/v2/health/ready', other)).status, 400, 'not ready while draining');
    // A new connection is refused.
    await assert.rejects(fetch(`${s.url}/v2/health/live`, { headers: { connection: 'close' } }));
    agent.destroy();
    other.destroy();
    const t = Date.now();
    await closing;
    assert.ok(Date.now() - t < 30_000, 'the drain ends once the client closed its connection, not at its 60 s grace');
  });

  it('REGRESSION a listener leaked per keep-alive connection per reload - no MaxListenersExceededWarning', async () => {
    const s = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      loadModels: ['simple'],
    });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const call = (path: string, body?: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = request(`${s.url}${path}`, { agent, method: body === undefined ? 'GET' : 'POST' }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end(body);
      });
    const data = Array.from({ length: 16 }, (_, i) => i);
    const infer = JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data },
      ],
    });
    try {
      for (let i = 0; i < 11; i++) {
        assert.equal(await call('/v2/models/simple/infer', infer), 200);
        const config = JSON.stringify({ name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 - (i % 2) });
        assert.equal(await call('/v2/repository/models/simple/load', JSON.stringify({ parameters: { config } })), 200);
      }
      await new Promise((r) => setImmediate(r));
      assert.ok(!warnings.includes('MaxListenersExceededWarning'), warnings.join(', '));
    } finally {
      process.off('warning', onWarning);
      agent.destroy();
      await s.close();
    }
  });
});
