import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  CancelledError,
  InvalidArgError,
  NotFoundError,
  UnavailableError,
  UnsupportedError,
  type InferInputTensor,
} from '../../src/client/index.js';
import { NereidGrpcClient, type StreamResponse } from '../../src/client/grpc.js';
import type { RunningGrpcServer } from '../../src/protocol/grpc/index.js';
import { startTestGrpcServer } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));

function simpleInputs(batch = 1, offset = 0): InferInputTensor[] {
  return [
    {
      name: 'INPUT0',
      datatype: 'INT32',
      shape: [batch, 16],
      data: Int32Array.from(range(16 * batch, (i) => (i % 16) + offset)),
    },
    { name: 'INPUT1', datatype: 'INT32', shape: [batch, 16], data: new Int32Array(16 * batch).fill(1) },
  ];
}

/** A text_encoder request big enough (8 × 512 tokens) to still be running when the test aborts it. */
function slowInputs(): InferInputTensor[] {
  const shape = [8, 512];
  return [
    { name: 'input_ids', datatype: 'INT32', shape, data: Int32Array.from(range(8 * 512, (i) => 1 + (i % 90))) },
    { name: 'attention_mask', datatype: 'INT32', shape, data: new Int32Array(8 * 512).fill(1) },
    { name: 'token_type_ids', datatype: 'INT32', shape, data: new Int32Array(8 * 512) },
  ];
}

describe('NereidGrpcClient (real server)', () => {
  let server: TestServer;
  let grpcServer: RunningGrpcServer;
  let client: NereidGrpcClient;
  before(async () => {
    server = await startNereid();
    grpcServer = await startTestGrpcServer(server);
    client = new NereidGrpcClient({ address: `127.0.0.1:${grpcServer.port}` });
  });
  after(async () => {
    client.close();
    await grpcServer.close();
    await server.close();
  });

  describe('health and metadata', () => {
    it('reports the server live and ready, and model readiness', async () => {
      assert.equal(await client.isServerLive(), true);
      assert.equal(await client.isServerReady(), true);
      assert.equal(await client.isModelReady('simple'), true);
      assert.equal(await client.isModelReady('no_such_model'), false);
    });

    it('reads server and model metadata with numeric shapes', async () => {
      assert.ok((await client.serverMetadata()).extensions.length > 0);
      const meta = await client.modelMetadata('simple', '1');
      assert.deepEqual(meta.outputs[0], { name: 'OUTPUT0', datatype: 'INT32', shape: [-1, 16] });
    });

    it('reads the model config with numbers and enum names', async () => {
      const config = await client.modelConfig('classifier');
      assert.equal(config.max_batch_size, 8);
      assert.deepEqual(config.input?.[0].dims, [8]);
      assert.equal(config.input?.[0].data_type, 'TYPE_FP32');
    });

    it('reads statistics and the repository index', async () => {
      await client.infer('simple', simpleInputs());
      const [stats] = await client.modelStatistics('simple');
      assert.ok(stats.inference_count >= 1);
      const index = await client.repositoryIndex({ ready: true });
      assert.deepEqual(index.map((m) => m.name).sort(), ['classifier', 'simple', 'text_encoder']);
    });
  });

  describe('infer', () => {
    it('infers with raw contents and returns typed arrays', async () => {
      const result = await client.infer('simple', simpleInputs(2), { id: 'g-1' });
      assert.equal(result.id, 'g-1');
      const sum = result.output('OUTPUT0');
      assert.ok(sum.data instanceof Int32Array);
      assert.deepEqual(sum.shape, [2, 16]);
      assert.deepEqual(
        Array.from(sum.data),
        range(32, (i) => (i % 16) + 1),
      );
    });

    it('returns only the requested outputs, and classification results', async () => {
      const subset = await client.infer('simple', simpleInputs(), { outputs: [{ name: 'OUTPUT1' }] });
      assert.deepEqual(
        subset.outputs.map((o) => o.name),
        ['OUTPUT1'],
      );
      const input: InferInputTensor = { name: 'INPUT', datatype: 'FP32', shape: [1, 8], data: new Float32Array(8) };
      const classified = await client.infer('classifier', [input], { outputs: [{ name: 'PROBS', classCount: 2 }] });
      assert.equal(classified.output('PROBS').datatype, 'BYTES');
      assert.equal(classified.strings('PROBS').length, 2);
    });
  });

  describe('cancellation, timeouts, errors', () => {
    it('rejects with CancelledError for a signal aborted before or during the call', async () => {
      const aborted = new AbortController();
      aborted.abort();
      await assert.rejects(client.infer('simple', simpleInputs(), { signal: aborted.signal }), CancelledError);
      const later = new AbortController();
      const call = client.infer('text_encoder', slowInputs(), { signal: later.signal });
      setTimeout(() => later.abort(), 5);
      await assert.rejects(call, /cancelled by the caller/);
    });

    it('rejects with CancelledError naming the deadline', async () => {
      await assert.rejects(client.infer('text_encoder', slowInputs(), { timeoutMs: 2 }), (err: unknown) => {
        assert.ok(err instanceof CancelledError);
        assert.match(err.message, /timed out after 2 ms/);
        return true;
      });
    });

    it('BAD CALL - maps gRPC codes to the error catalogue with the server message', async () => {
      await assert.rejects(client.infer('no_such_model', simpleInputs()), (err: unknown) => {
        assert.ok(err instanceof NotFoundError);
        assert.match(err.message, /no_such_model/);
        return true;
      });
      const wrong: InferInputTensor[] = [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) },
        simpleInputs()[1],
      ];
      await assert.rejects(client.infer('simple', wrong), InvalidArgError);
      // Load/unload in the default control mode: UNIMPLEMENTED before the lifecycle work, UNAVAILABLE after.
      await assert.rejects(client.loadModel('simple'), (err: unknown) => {
        assert.ok(err instanceof UnsupportedError || err instanceof UnavailableError);
        return true;
      });
    });

    it('an unreachable server is an UnavailableError', async () => {
      const nowhere = new NereidGrpcClient({ address: '127.0.0.1:1' });
      await assert.rejects(nowhere.serverMetadata({ timeoutMs: 5000 }), UnavailableError);
      nowhere.close();
    });
  });

  describe('stream', () => {
    it('answers requests in order, an error per failed request, and ends after end()', async () => {
      const stream = client.stream();
      stream.send('simple', simpleInputs(1, 0), { id: 'a' });
      stream.send('no_such_model', simpleInputs(), { id: 'b' });
      stream.send('simple', simpleInputs(1, 100), { id: 'c' });
      stream.end();
      const got: StreamResponse[] = [];
      for await (const r of stream) got.push(r);
      assert.equal(got.length, 3);
      assert.equal(got[0].result?.id, 'a');
      assert.deepEqual(
        Array.from(got[0].result?.output('OUTPUT0').data as Int32Array),
        range(16, (i) => i + 1),
      );
      assert.match(got[1].error?.message ?? '', /no_such_model/);
      assert.equal(got[2].result?.id, 'c');
      assert.equal((got[2].result?.output('OUTPUT0').data as Int32Array)[0], 101);
    });

    it('with endOnError, the first failure ends the stream with its typed error', async () => {
      const stream = client.stream({ endOnError: true });
      stream.send('no_such_model', simpleInputs());
      stream.end();
      await assert.rejects(async () => {
        for await (const _ of stream) assert.fail('no response expected');
      }, NotFoundError);
    });

    it('a cancelled stream makes the iterator throw CancelledError', async () => {
      const controller = new AbortController();
      const stream = client.stream({ signal: controller.signal });
      stream.send('text_encoder', slowInputs());
      setTimeout(() => controller.abort(), 5);
      await assert.rejects(async () => {
        for await (const _ of stream) assert.fail('no response expected');
      }, CancelledError);
    });
  });
});

describe('NereidGrpcClient model control (real server, explicit mode)', () => {
  let server: TestServer;
  let grpcServer: RunningGrpcServer;
  let client: NereidGrpcClient;
  before(async () => {
    server = await startNereid({ modelControlMode: 'explicit' });
    grpcServer = await startTestGrpcServer(server);
    client = new NereidGrpcClient({ address: `127.0.0.1:${grpcServer.port}` });
  });
  after(async () => {
    client.close();
    await grpcServer.close();
    await server.close();
  });

  it('loads (with an override config), infers, unloads', async () => {
    assert.equal(await client.isModelReady('simple'), false);
    await client.loadModel('simple');
    assert.equal(await client.isModelReady('simple'), true);
    assert.equal((await client.infer('simple', simpleInputs())).outputs.length, 2);
    const config = await client.modelConfig('simple');
    await client.loadModel('simple', { config: JSON.stringify({ ...config, max_batch_size: 2 }) });
    assert.equal((await client.modelConfig('simple')).max_batch_size, 2);
    await client.unloadModel('simple', { unloadDependents: false });
    assert.equal(await client.isModelReady('simple'), false);
  });
});
