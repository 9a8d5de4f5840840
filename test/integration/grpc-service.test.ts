import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { NereidError } from '../../src/core/errors.js';
import { grpcStatusOf } from '../../src/protocol/kserve/status.js';
import { loadServices } from '../../src/protocol/grpc/index.js';
import { startGrpcNereid, type GrpcNereid } from '../helpers/grpc.js';

/** Black-box: every rpc of GRPCInferenceService except inference, plus grpc.health.v1, over real gRPC. */

type StatusError = Error & { code: number; details: string };

async function rejectsWith(p: Promise<unknown>, code: grpc.status, phrase?: string | RegExp): Promise<StatusError> {
  const err = (await p.then(
    () => assert.fail(`expected status ${grpc.status[code]}`),
    (e: unknown) => e,
  )) as StatusError;
  assert.equal(err.code, code, `got ${grpc.status[err.code]}: ${err.details}`);
  if (phrase !== undefined) assert.match(err.details, typeof phrase === 'string' ? new RegExp(escape(phrase)) : phrase);
  return err;
}
const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * The gRPC answer must be the facade's answer: its value, or its error with the mapped code and the same
 * message. Extensions still being built answer UNIMPLEMENTED now and their real result later, unchanged here.
 */
async function sameAsFacade<T>(facade: () => T | Promise<T>, rpc: Promise<unknown>): Promise<T | undefined> {
  let expected: T;
  try {
    expected = await facade();
  } catch (err) {
    const e = NereidError.from(err);
    await rejectsWith(rpc, grpcStatusOf(e.code), e.message);
    return undefined;
  }
  await rpc;
  return expected;
}

describe('gRPC service (non-inference rpcs)', () => {
  let n: GrpcNereid;
  before(async () => {
    n = await startGrpcNereid();
  });
  after(async () => {
    await n.close();
  });

  it('answers ServerLive and ServerReady', async () => {
    assert.deepEqual(await n.unary('ServerLive', {}), { live: true });
    assert.deepEqual(await n.unary('ServerReady', {}), { ready: true });
  });

  it('answers ModelReady, with ready=false (not an error) for an unknown model or version', async () => {
    assert.deepEqual(await n.unary('ModelReady', { name: 'simple' }), { ready: true });
    assert.deepEqual(await n.unary('ModelReady', { name: 'simple', version: '1' }), { ready: true });
    assert.deepEqual(await n.unary('ModelReady', { name: 'nope' }), { ready: false });
    assert.deepEqual(await n.unary('ModelReady', { name: 'simple', version: '99' }), { ready: false });
  });

  it('answers ServerMetadata from the facade', async () => {
    const md = await n.unary('ServerMetadata', {});
    assert.deepEqual(md, { ...n.running.server.metadata() });
  });

  it('answers ModelMetadata with int64 shapes (-1 for the batch dimension)', async () => {
    const md = await n.unary<{ name: string; versions: string[]; inputs: { shape: string[] }[] }>('ModelMetadata', {
      name: 'simple',
    });
    assert.equal(md.name, 'simple');
    assert.deepEqual(md.versions, ['1']);
    assert.deepEqual(md.inputs[0], { name: 'INPUT0', datatype: 'INT32', shape: ['-1', '16'] });
  });

  it('BAD CALL - ModelMetadata of an unknown model or version is NOT_FOUND', async () => {
    await rejectsWith(n.unary('ModelMetadata', { name: 'nope' }), grpc.status.NOT_FOUND, "'nope'");
    await rejectsWith(n.unary('ModelMetadata', { name: 'simple', version: '99' }), grpc.status.NOT_FOUND);
  });

  it('answers ModelConfig as the ModelConfig message (enum names, int64 dims, labels)', async () => {
    const { config } = await n.unary<{ config: Record<string, unknown> }>('ModelConfig', { name: 'classifier' });
    assert.equal(config.name, 'classifier');
    assert.equal(config.max_batch_size, 8);
    const input = (config.input as Record<string, unknown>[])[0];
    assert.equal(input.data_type, 'TYPE_FP32');
    assert.deepEqual(input.dims, ['8']);
    assert.equal((config.output as Record<string, unknown>[])[0].label_filename, 'labels.txt');
    assert.equal((config.instance_group as Record<string, unknown>[])[0].kind, 'KIND_CPU');
  });

  it('BAD CALL - ModelConfig of an unknown model is NOT_FOUND', async () => {
    await rejectsWith(n.unary('ModelConfig', { name: 'nope' }), grpc.status.NOT_FOUND);
  });

  it('answers ModelStatistics for one model and for all, NOT_FOUND for an unknown one', async () => {
    const one = await n.unary<{ model_stats: { name: string; version: string }[] }>('ModelStatistics', {
      name: 'simple',
    });
    assert.deepEqual(
      one.model_stats.map((s) => [s.name, s.version]),
      [['simple', '1']],
    );
    const all = await n.unary<{ model_stats: unknown[] }>('ModelStatistics', {});
    assert.equal(all.model_stats.length, n.running.server.modelStatistics().length);
    await rejectsWith(n.unary('ModelStatistics', { name: 'nope' }), grpc.status.NOT_FOUND);
  });

  it('answers RepositoryIndex (all, or ready only); a repository name is UNIMPLEMENTED', async () => {
    const { models } = await n.unary<{ models: { name: string; state: string }[] }>('RepositoryIndex', {});
    assert.deepEqual(
      models.map((m) => m.name),
      ['classifier', 'simple', 'text_encoder'],
    );
    const ready = await n.unary<{ models: unknown[] }>('RepositoryIndex', { ready: true });
    assert.equal(ready.models.length, 3);
    await rejectsWith(n.unary('RepositoryIndex', { repository_name: 'x' }), grpc.status.UNIMPLEMENTED);
  });

  it('answers RepositoryModelLoad/Unload as the facade does (never a fake success)', async () => {
    await sameAsFacade(
      () => n.running.server.loadModel('simple'),
      n.unary('RepositoryModelLoad', { model_name: 'simple' }),
    );
    await rejectsWith(
      n.unary('RepositoryModelLoad', { repository_name: 'r', model_name: 'simple' }),
      grpc.status.UNIMPLEMENTED,
      'repository_name',
    );
    await rejectsWith(
      n.unary('RepositoryModelLoad', { model_name: 'simple', parameters: { config: { int64_param: 1 } } }),
      grpc.status.INVALID_ARGUMENT,
      'config',
    );
  });

  it('answers LogSettings and TraceSetting as the facade does', async () => {
    const log = await sameAsFacade(() => n.running.server.logSettings(), n.unary('LogSettings', {}));
    if (log !== undefined) {
      const got = await n.unary<{ settings: Record<string, unknown> }>('LogSettings', {});
      assert.deepEqual(Object.keys(got.settings).sort(), Object.keys(log).sort());
    }
    await sameAsFacade(() => n.running.server.traceSettings(), n.unary('TraceSetting', {}));
  });

  it('answers shared-memory status empty and registration UNIMPLEMENTED while client shared memory is off', async () => {
    assert.deepEqual(await n.unary('SystemSharedMemoryStatus', {}), { regions: {} });
    assert.deepEqual(await n.unary('CudaSharedMemoryStatus', {}), { regions: {} });
    const reg = { name: 'r', key: '/k', offset: 0, byte_size: 64 };
    await rejectsWith(
      n.unary('SystemSharedMemoryRegister', reg),
      grpc.status.UNIMPLEMENTED,
      "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.",
    );
    await rejectsWith(n.unary('SystemSharedMemoryUnregister', { name: 'r' }), grpc.status.UNIMPLEMENTED);
    await rejectsWith(
      n.unary('CudaSharedMemoryRegister', { name: 'r', raw_handle: Buffer.alloc(4), device_id: 0, byte_size: 64 }),
      grpc.status.UNIMPLEMENTED,
    );
    await rejectsWith(n.unary('CudaSharedMemoryUnregister', {}), grpc.status.UNIMPLEMENTED);
  });

  it('answers grpc.health.v1.Health/Check with SERVING while live', async () => {
    const { Health } = loadServices();
    const health = new Health(n.address, grpc.credentials.createInsecure());
    try {
      const res = await new Promise((resolve, reject) =>
        (health as unknown as { Check: grpc.requestCallback<unknown> & ((...a: unknown[]) => void) }).Check(
          { service: '' },
          (err: Error | null, r: unknown) => (err ? reject(err) : resolve(r)),
        ),
      );
      assert.deepEqual(res, { status: 'SERVING' });
    } finally {
      health.close();
    }
  });

  it('BAD CALL - an unknown rpc is UNIMPLEMENTED', async () => {
    const raw = new grpc.Client(n.address, grpc.credentials.createInsecure());
    try {
      const err = await new Promise<grpc.ServiceError>((resolve) =>
        raw.makeUnaryRequest(
          '/inference.GRPCInferenceService/NoSuchRpc',
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          (e) => resolve(e as grpc.ServiceError),
        ),
      );
      assert.equal(err.code, grpc.status.UNIMPLEMENTED);
    } finally {
      raw.close();
    }
  });

  it('ignores unknown fields in a request (proto3 rules) and rejects bytes that are not the message', async () => {
    const raw = new grpc.Client(n.address, grpc.credentials.createInsecure());
    const call = (body: Buffer): Promise<{ err: grpc.ServiceError | null; res?: Buffer }> =>
      new Promise((resolve) =>
        raw.makeUnaryRequest(
          '/inference.GRPCInferenceService/ModelReady',
          (b: Buffer) => b,
          (b: Buffer) => b,
          body,
          (err, res) => resolve({ err, res }),
        ),
      );
    try {
      // name="simple" (field 1) plus an unknown varint field 99 = 7.
      const known = Buffer.concat([Buffer.from([0x0a, 6]), Buffer.from('simple')]);
      const unknown = Buffer.from([0x98, 0x06, 7]);
      const ok = await call(Buffer.concat([known, unknown]));
      assert.equal(ok.err, null);
      assert.deepEqual([...(ok.res as Buffer)], [0x08, 0x01]); // ready = true
      const bad = await call(Buffer.from([0x9f, 0x06, 1])); // wire type 7 does not exist
      assert.ok(bad.err);
      assert.notEqual(bad.err.code, grpc.status.OK);
    } finally {
      raw.close();
    }
  });
});
