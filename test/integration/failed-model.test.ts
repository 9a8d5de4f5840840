/**
 * Issue 26 item 7: a model the repository has but could not load answers inference and metadata with UNAVAILABLE
 * and the reason it failed (the rule of a restarting instance, docs/architecture.md "Health"), not 404 "is not
 * found": a client can tell "fix the model" from "wrong name". A name the repository does not have stays NOT_FOUND.
 */
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { RunningGrpcServer } from '../../src/protocol/grpc/server.js';
import { callUnary, inferenceClient, simpleRaw, startTestGrpcServer } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

const INFER_BODY = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
  ],
});

/** gRPC status codes used here. */
const UNAVAILABLE = 14;
const NOT_FOUND = 5;

describe('a model that failed to load answers UNAVAILABLE with the reason', () => {
  let root: string;
  let s: TestServer;
  let grpcServer: RunningGrpcServer;
  let client: grpc.Client;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'nereid-failed-'));
    // 'badconfig': its config.pbtxt has a typo (fails before any spec); 'badfile': a valid config, a model file
    // onnxruntime cannot read (fails creating its instances).
    await mkdir(join(root, 'badconfig', '1'), { recursive: true });
    await cp(join(EXAMPLES, 'simple', '1', 'model.onnx'), join(root, 'badconfig', '1', 'model.onnx'));
    await writeFile(
      join(root, 'badconfig', 'config.pbtxt'),
      'platform: "onnxruntime_onnx"\nmax_batch_size: 8\nmax_batch_sise: 4\n',
    );
    await mkdir(join(root, 'badfile', '1'), { recursive: true });
    await writeFile(join(root, 'badfile', 'config.pbtxt'), 'name: "badfile"\nplatform: "onnxruntime_onnx"\n');
    await writeFile(join(root, 'badfile', '1', 'model.onnx'), 'this is not an onnx file');
    s = await startNereid({ repositories: [root], exitOnError: false });
    grpcServer = await startTestGrpcServer(s);
    client = inferenceClient(`127.0.0.1:${grpcServer.port}`);
  });
  after(async () => {
    client?.close();
    await grpcServer?.close(1000);
    await s?.close();
    await rm(root, { recursive: true, force: true });
  });

  for (const [model, why] of [
    ['badconfig', /max_batch_sise/],
    ['badfile', /onnxruntime could not load the model/],
  ] as const) {
    it(`BAD MODEL - '${model}': HTTP inference and metadata answer 503 with the reason`, async () => {
      for (const [path, init] of [
        [`/v2/models/${model}/infer`, { method: 'POST', body: INFER_BODY }],
        [`/v2/models/${model}/versions/1/infer`, { method: 'POST', body: INFER_BODY }],
        [`/v2/models/${model}`, {}],
        [`/v2/models/${model}/versions/1`, {}],
      ] as const) {
        const res = await fetch(`${s.url}${path}`, init);
        const body = (await res.json()) as { error: string };
        assert.equal(res.status, 503, `${path}: ${body.error}`);
        assert.doesNotMatch(body.error, /is not found/, path);
        assert.match(body.error, /failed to load/, path);
        assert.match(body.error, why, path);
        assert.ok(!body.error.includes(root), `no server path: ${body.error}`);
      }
    });

    it(`BAD MODEL - '${model}': gRPC ModelInfer and ModelMetadata answer UNAVAILABLE with the reason`, async () => {
      for (const [method, req] of [
        ['ModelInfer', simpleRaw({ model_name: model })],
        ['ModelInfer', simpleRaw({ model_name: model, model_version: '1' })],
        ['ModelMetadata', { name: model }],
        ['ModelMetadata', { name: model, version: '1' }],
      ] as const) {
        await assert.rejects(callUnary(client, method, req), (e: grpc.ServiceError) => {
          assert.equal(e.code, UNAVAILABLE, `${method}: ${e.details}`);
          assert.match(e.details, /failed to load/);
          assert.match(e.details, why);
          return true;
        });
      }
    });
  }

  it('BAD CALL - a model the repository does not have is still NOT_FOUND (HTTP 404, gRPC NOT_FOUND)', async () => {
    const res = await fetch(`${s.url}/v2/models/nope/infer`, { method: 'POST', body: INFER_BODY });
    assert.equal(res.status, 404);
    assert.match(((await res.json()) as { error: string }).error, /'nope' is not found/);
    await assert.rejects(callUnary(client, 'ModelMetadata', { name: 'nope' }), { code: NOT_FOUND });
  });
});
