import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { writeFillModel } from '../fixtures/fill-model.js';
import { callUnary, inferenceClient, simpleRaw } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * The gRPC transport's limits, each a regression test of a defect found by probing: a gzip message inflating to
 * gigabytes, a stream whose client never reads (responses piling up without bound), and oversized metadata that
 * made a client wait for its deadline.
 */

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
