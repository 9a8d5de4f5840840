import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';
import { API_CATEGORIES } from '../../src/protocol/restricted.js';
import { serve } from '../../src/serve.js';
import { callUnary, inferenceClient, simpleRaw } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * `--http-restricted-api` and `--grpc-restricted-protocol` as Triton: every endpoint of a restricted category answers
 * 403 / UNAVAILABLE "... is restricted, expecting header '<key>'" without the header or with a wrong value, and
 * works with it; other categories stay open.
 */

const data16 = Array.from({ length: 16 }, (_, i) => i);
const inferBody = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: data16 },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: data16 },
  ],
});

/** One endpoint of each route of the HTTP table, with its category. */
const HTTP_ENDPOINTS: [string, 'GET' | 'POST', string, string?][] = [
  ['health', 'GET', '/v2/health/live'],
  ['health', 'GET', '/v2/health/ready'],
  ['health', 'GET', '/v2/models/simple/ready'],
  ['metadata', 'GET', '/v2'],
  ['metadata', 'GET', '/v2/models/simple'],
  ['inference', 'POST', '/v2/models/simple/infer', inferBody],
  ['inference', 'POST', '/v2/models/simple/generate', '{}'],
  ['model-config', 'GET', '/v2/models/simple/config'],
  ['statistics', 'GET', '/v2/models/stats'],
  ['statistics', 'GET', '/v2/models/simple/stats'],
  ['trace', 'GET', '/v2/trace/setting'],
  ['trace', 'GET', '/v2/models/simple/trace/setting'],
  ['logging', 'GET', '/v2/logging'],
  ['model-repository', 'POST', '/v2/repository/index', '{}'],
  ['model-repository', 'POST', '/v2/repository/models/simple/load', '{}'],
  ['shared-memory', 'GET', '/v2/systemsharedmemory/status'],
  ['shared-memory', 'POST', '/v2/systemsharedmemory/unregister'],
  ['shared-memory', 'GET', '/v2/cudasharedmemory/status'],
];

describe('Restricted APIs (HTTP and gRPC)', () => {
  let s: TestServer;
  let grpcClient: grpc.Client;
  before(async () => {
    s = await startNereid({
      modelControlMode: 'explicit',
      loadModels: ['simple'],
      // Every category restricted, in two groups with different keys, as an operator would split admin and data.
      httpRestrictedApi: [
        'model-repository,logging,trace,shared-memory,statistics,model-config:admin-key=s3cret',
        'health,metadata,inference:Infer-Key=abc',
      ],
      grpcRestrictedProtocol: [
        'model-repository,logging,trace,shared-memory,statistics,model-config:admin-key=s3cret',
        'health,metadata,inference:infer-key=abc',
      ],
    });
    grpcClient = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    grpcClient.close();
    await s.close();
  });

  const headerFor = (category: string): [string, string] =>
    ['health', 'metadata', 'inference'].includes(category) ? ['infer-key', 'abc'] : ['admin-key', 's3cret'];

  it('HTTP: every route of a restricted category answers 403 without the header or with a wrong value', async () => {
    assert.deepEqual(new Set(HTTP_ENDPOINTS.map((e) => e[0])), new Set(API_CATEGORIES), 'every category covered');
    for (const [category, method, path, body] of HTTP_ENDPOINTS) {
      const [key, value] = headerFor(category);
      for (const headers of [
        {},
        { [key]: `${value}x` },
        { [key === 'admin-key' ? 'infer-key' : 'admin-key']: value },
      ]) {
        const res = await fetch(s.url + path, { method, body, headers });
        assert.equal(res.status, 403, `${method} ${path} ${JSON.stringify(headers)}`);
        const expectedHeader = key === 'infer-key' ? 'Infer-Key' : 'admin-key';
        assert.deepEqual(await res.json(), { error: `This API is restricted, expecting header '${expectedHeader}'` });
      }
    }
  });

  it('HTTP: with the header (any case of its name) every route works as unrestricted', async () => {
    for (const [category, method, path, body] of HTTP_ENDPOINTS) {
      const [key, value] = headerFor(category);
      const res = await fetch(s.url + path, { method, body, headers: { [key.toUpperCase()]: value } });
      assert.notEqual(res.status, 403, `${method} ${path}: ${await res.text()}`);
      // Past the restriction the endpoint answers for itself: generate's body here is not a valid request, and client
      // shared memory is off by default (unregister is refused with 501).
      if (path.endsWith('/generate')) continue;
      if (path.endsWith('/unregister')) assert.equal(res.status, 501);
      else assert.ok(res.status < 400, `${method} ${path}: ${res.status}`);
    }
  });

  it('HTTP: the restriction is checked before the method (403, not 405) and unknown paths stay 404', async () => {
    assert.equal((await fetch(`${s.url}/v2/repository/index`)).status, 403);
    assert.equal((await fetch(`${s.url}/v2/repository/index`, { headers: { 'admin-key': 's3cret' } })).status, 405);
    assert.equal((await fetch(`${s.url}/v2/nothing`)).status, 404);
  });

  const unaryRpcs: [string, string, object][] = [
    ['health', 'ServerLive', {}],
    ['health', 'ServerReady', {}],
    ['health', 'ModelReady', { name: 'simple' }],
    ['metadata', 'ServerMetadata', {}],
    ['metadata', 'ModelMetadata', { name: 'simple' }],
    ['inference', 'ModelInfer', simpleRaw()],
    ['model-config', 'ModelConfig', { name: 'simple' }],
    ['statistics', 'ModelStatistics', { name: 'simple' }],
    ['model-repository', 'RepositoryIndex', {}],
    ['shared-memory', 'SystemSharedMemoryStatus', {}],
    ['shared-memory', 'CudaSharedMemoryStatus', {}],
    ['trace', 'TraceSetting', {}],
    ['logging', 'LogSettings', {}],
  ];

  it('gRPC: every rpc of a restricted category answers UNAVAILABLE without triton-grpc-protocol-<key>', async () => {
    for (const [category, rpc, request] of unaryRpcs) {
      const [key, value] = headerFor(category);
      for (const md of [new grpc.Metadata(), meta(`triton-grpc-protocol-${key}`, 'wrong'), meta(key, value)]) {
        await assert.rejects(
          callUnary(grpcClient, rpc, request, {}, md),
          (err: grpc.ServiceError) => {
            assert.equal(err.code, grpc.status.UNAVAILABLE, rpc);
            assert.equal(err.details, `This protocol is restricted, expecting header 'triton-grpc-protocol-${key}'`);
            return true;
          },
          rpc,
        );
      }
      const ok = await callUnary(grpcClient, rpc, request, {}, meta(`triton-grpc-protocol-${key}`, value));
      assert.ok(ok, rpc);
    }
  });

  it('gRPC: a ModelStreamInfer without the header ends at once with UNAVAILABLE; with it, it serves', async () => {
    const { Inference } = await import('../../src/protocol/grpc/proto.js').then((m) => m.loadServices());
    const client = new Inference(`127.0.0.1:${s.grpcPort}`, grpc.credentials.createInsecure()) as unknown as {
      ModelStreamInfer(md: grpc.Metadata): grpc.ClientDuplexStream<object, { error_message: string }>;
      close(): void;
    };
    try {
      const refused = client.ModelStreamInfer(new grpc.Metadata());
      refused.write(simpleRaw());
      const err = await new Promise<grpc.ServiceError>((resolve) => {
        refused.on('error', resolve);
        refused.on('data', () => undefined);
      });
      assert.equal(err.code, grpc.status.UNAVAILABLE);
      assert.match(err.details, /This protocol is restricted, expecting header 'triton-grpc-protocol-infer-key'/);

      const stream = client.ModelStreamInfer(meta('triton-grpc-protocol-infer-key', 'abc'));
      stream.write(simpleRaw());
      stream.end();
      const responses: { error_message: string }[] = [];
      for await (const r of stream) responses.push(r as { error_message: string });
      assert.equal(responses.length, 1);
      assert.equal(responses[0].error_message, '');
    } finally {
      client.close();
    }
  });

  it('gRPC health service: Check is a health API', async () => {
    const { Health } = await import('../../src/protocol/grpc/proto.js').then((m) => m.loadServices());
    const health = new Health(`127.0.0.1:${s.grpcPort}`, grpc.credentials.createInsecure());
    try {
      await assert.rejects(
        callUnary(health, 'Check', {}),
        (err: grpc.ServiceError) => err.code === grpc.status.UNAVAILABLE,
      );
      const ok = await callUnary<{ status: string }>(
        health,
        'Check',
        {},
        {},
        meta('triton-grpc-protocol-infer-key', 'abc'),
      );
      assert.equal(ok.status, 'SERVING');
    } finally {
      health.close();
    }
  });
});

describe('Restricted APIs at start-up', () => {
  it('BAD FLAG - an unknown API or one in two groups fails serve() before any model loads', async () => {
    await assert.rejects(
      serve({
        repositories: [EXAMPLES],
        httpPort: 0,
        allowGrpc: false,
        allowMetrics: false,
        httpRestrictedApi: ['model-reposit:k=v'],
      }),
      /unknown restricted api 'model-reposit'/,
    );
    await assert.rejects(
      serve({
        repositories: [EXAMPLES],
        httpPort: 0,
        allowHttp: false,
        allowMetrics: false,
        grpcRestrictedProtocol: ['health:k=v', 'health:j=w'],
      }),
      /restricted protocol 'health' can not be specified in multiple config groups/,
    );
  });
});

function meta(key: string, value: string): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set(key, value);
  return md;
}
