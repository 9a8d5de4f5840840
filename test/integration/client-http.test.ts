import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  CancelledError,
  InvalidArgError,
  NereidError,
  NereidHttpClient,
  NotFoundError,
  UnavailableError,
  UnsupportedError,
  type InferInputTensor,
} from '../../src/client/index.js';
import { startNereid, type TestServer } from '../helpers/server.js';

const range = (n: number, f: (i: number) => number = (i) => i): number[] => Array.from({ length: n }, (_, i) => f(i));

/** `simple`'s two inputs for a batch of `batch`: INPUT0 = 0..15 per row, INPUT1 = 1s. */
function simpleInputs(batch = 1): InferInputTensor[] {
  return [
    { name: 'INPUT0', datatype: 'INT32', shape: [batch, 16], data: Int32Array.from(range(16 * batch, (i) => i % 16)) },
    { name: 'INPUT1', datatype: 'INT32', shape: [batch, 16], data: new Int32Array(16 * batch).fill(1) },
  ];
}

/** A text_encoder request big enough (8 × 512 tokens) to still be running when the test aborts it. */
function slowInputs(): InferInputTensor[] {
  const shape = [8, 512];
  const ids = Int32Array.from(range(8 * 512, (i) => 1 + (i % 90)));
  return [
    { name: 'input_ids', datatype: 'INT32', shape, data: ids },
    { name: 'attention_mask', datatype: 'INT32', shape, data: new Int32Array(8 * 512).fill(1) },
    { name: 'token_type_ids', datatype: 'INT32', shape, data: new Int32Array(8 * 512) },
  ];
}

describe('NereidHttpClient (real server)', () => {
  let server: TestServer;
  let client: NereidHttpClient;
  before(async () => {
    server = await startNereid();
    client = new NereidHttpClient({ url: server.url });
  });
  after(async () => {
    await server.close();
  });

  describe('health and metadata', () => {
    it('reports the server live and ready', async () => {
      assert.equal(await client.isServerLive(), true);
      assert.equal(await client.isServerReady(), true);
    });

    it('reads server metadata with its extensions', async () => {
      const meta = await client.serverMetadata();
      assert.equal(typeof meta.name, 'string');
      assert.equal(typeof meta.version, 'string');
      assert.ok(meta.extensions.includes('binary_tensor_data'));
    });

    it('reports model readiness, false for an unknown model or version', async () => {
      assert.equal(await client.isModelReady('simple'), true);
      assert.equal(await client.isModelReady('simple', '1'), true);
      assert.equal(await client.isModelReady('simple', '9'), false);
      assert.equal(await client.isModelReady('no_such_model'), false);
    });

    it('reads model metadata with -1 for the batch dimension', async () => {
      const meta = await client.modelMetadata('simple');
      assert.equal(meta.name, 'simple');
      assert.deepEqual(meta.versions, ['1']);
      assert.deepEqual(
        meta.inputs.map((t) => [t.name, t.datatype, t.shape]),
        [
          ['INPUT0', 'INT32', [-1, 16]],
          ['INPUT1', 'INT32', [-1, 16]],
        ],
      );
    });

    it('reads the model config in Triton JSON form', async () => {
      const config = await client.modelConfig('classifier', '1');
      assert.equal(config.name, 'classifier');
      assert.equal(config.max_batch_size, 8);
      assert.equal(config.output?.[0].label_filename, 'labels.txt');
      assert.equal(config.input?.[0].data_type, 'TYPE_FP32');
    });

    it('reads statistics of all models, of one model and of one version', async () => {
      await client.infer('simple', simpleInputs());
      const all = await client.modelStatistics();
      assert.ok(all.some((s) => s.name === 'classifier'));
      const [simple] = await client.modelStatistics('simple', '1');
      assert.equal(simple.name, 'simple');
      assert.ok(simple.inference_count >= 1);
      assert.ok(simple.inference_stats.success.count >= 1);
    });

    it('lists the repository index, ready models only on request', async () => {
      const index = await client.repositoryIndex();
      assert.deepEqual(index.map((m) => m.name).sort(), ['classifier', 'simple', 'text_encoder']);
      const ready = await client.repositoryIndex({ ready: true });
      assert.ok(ready.every((m) => m.state === 'READY'));
    });
  });

  describe('infer', () => {
    it('infers with binary tensor data (default)', async () => {
      const result = await client.infer('simple', simpleInputs(2));
      assert.equal(result.model, 'simple');
      assert.equal(result.version, '1');
      const sum = result.output('OUTPUT0');
      assert.equal(sum.datatype, 'INT32');
      assert.deepEqual(sum.shape, [2, 16]);
      assert.ok(sum.data instanceof Int32Array);
      assert.deepEqual(
        Array.from(sum.data),
        range(32, (i) => (i % 16) + 1),
      );
      assert.deepEqual(
        Array.from(result.output('OUTPUT1').data as Int32Array),
        range(32, (i) => (i % 16) - 1),
      );
    });

    it('infers with JSON (binary: false) and gets the same typed arrays', async () => {
      const result = await client.infer('simple', simpleInputs(), { binary: false });
      const sum = result.output('OUTPUT0');
      assert.ok(sum.data instanceof Int32Array);
      assert.deepEqual(
        Array.from(sum.data),
        range(16, (i) => i + 1),
      );
    });

    it('returns only the requested outputs', async () => {
      for (const binary of [true, false]) {
        const result = await client.infer('simple', simpleInputs(), { outputs: [{ name: 'OUTPUT1' }], binary });
        assert.deepEqual(
          result.outputs.map((o) => o.name),
          ['OUTPUT1'],
        );
        assert.throws(() => result.output('OUTPUT0'), NotFoundError);
      }
    });

    it('classifies: top-N as BYTES "value:index:label"', async () => {
      const input: InferInputTensor = {
        name: 'INPUT',
        datatype: 'FP32',
        shape: [1, 8],
        data: Float32Array.from(range(8, (i) => i / 8)),
      };
      for (const binary of [true, false]) {
        const result = await client.infer('classifier', [input], {
          outputs: [{ name: 'PROBS', classCount: 3 }],
          binary,
        });
        const probs = result.output('PROBS');
        assert.equal(probs.datatype, 'BYTES');
        assert.deepEqual(probs.shape, [1, 3]);
        const classes = result.strings('PROBS');
        assert.equal(classes.length, 3);
        for (const c of classes) assert.match(c, /^[0-9.e-]+:[0-4]:\S+$/);
      }
    });

    it('echoes the request id', async () => {
      const result = await client.infer('simple', simpleInputs(), { id: 'req-42' });
      assert.equal(result.id, 'req-42');
      const none = await client.infer('simple', simpleInputs());
      assert.equal(none.id, undefined);
    });

    it('returns FP32 outputs of a variable-shape model', async () => {
      const shape = [2, 5];
      const result = await client.infer('text_encoder', [
        { name: 'input_ids', datatype: 'INT32', shape, data: Int32Array.from(range(10, (i) => i + 1)) },
        { name: 'attention_mask', datatype: 'INT32', shape, data: new Int32Array(10).fill(1) },
        { name: 'token_type_ids', datatype: 'INT32', shape, data: new Int32Array(10) },
      ]);
      const out = result.output('output');
      assert.deepEqual(out.shape, [2, 5, 64]);
      assert.ok(out.data instanceof Float32Array);
      assert.equal(out.data.length, 2 * 5 * 64);
    });
  });

  describe('cancellation and timeouts', () => {
    it('rejects at once with CancelledError when the signal is already aborted', async () => {
      const controller = new AbortController();
      controller.abort();
      await assert.rejects(client.infer('simple', simpleInputs(), { signal: controller.signal }), CancelledError);
      await assert.rejects(client.serverMetadata({ signal: controller.signal }), CancelledError);
    });

    it('rejects with CancelledError when the signal aborts during the call', async () => {
      const controller = new AbortController();
      const call = client.infer('text_encoder', slowInputs(), { signal: controller.signal });
      setTimeout(() => controller.abort(), 5);
      await assert.rejects(call, (err: unknown) => {
        assert.ok(err instanceof CancelledError);
        assert.match(err.message, /cancelled by the caller/);
        return true;
      });
      // The server is still fine afterwards.
      assert.equal(await client.isServerReady(), true);
    });

    it('rejects with CancelledError naming the timeout (per call and per client)', async () => {
      await assert.rejects(client.infer('text_encoder', slowInputs(), { timeoutMs: 2 }), (err: unknown) => {
        assert.ok(err instanceof CancelledError);
        assert.match(err.message, /timed out after 2 ms/);
        return true;
      });
      const impatient = new NereidHttpClient({ url: server.url, timeoutMs: 2 });
      await assert.rejects(impatient.infer('text_encoder', slowInputs()), /timed out after 2 ms/);
    });
  });

  describe('errors', () => {
    it('BAD CALL - unknown model is a NotFoundError with the server message', async () => {
      await assert.rejects(client.infer('no_such_model', simpleInputs()), (err: unknown) => {
        assert.ok(err instanceof NotFoundError);
        assert.match(err.message, /no_such_model/);
        return true;
      });
      await assert.rejects(client.modelMetadata('no_such_model'), NotFoundError);
      await assert.rejects(client.modelConfig('no_such_model'), NotFoundError);
      await assert.rejects(client.modelStatistics('no_such_model'), NotFoundError);
    });

    it('BAD CALL - wrong datatype is an InvalidArgError from the server', async () => {
      const inputs: InferInputTensor[] = [
        { name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: new Float32Array(16) },
        simpleInputs()[1],
      ];
      await assert.rejects(client.infer('simple', inputs), (err: unknown) => {
        assert.ok(err instanceof InvalidArgError);
        assert.match(err.message, /INPUT0/);
        return true;
      });
    });

    it('BAD CALL - data that does not fit its datatype or shape fails before sending', async () => {
      const wrongArray = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Float32Array(16) } as const;
      await assert.rejects(client.infer('simple', [wrongArray]), /INT32 data must be a Int32Array/);
      const wrongCount = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(15) } as const;
      await assert.rejects(client.infer('simple', [wrongCount]), InvalidArgError);
    });

    it('load and unload in the default control mode reject with the class of the server status', async () => {
      // Which status the server uses here follows the lifecycle work (501 before it, 503 after, as Triton): the
      // client's job is to map whichever comes to its class, keeping the message.
      const byStatus: Record<number, new (m: string) => Error> = { 501: UnsupportedError, 503: UnavailableError };
      for (const action of ['load', 'unload'] as const) {
        const raw = await fetch(`${server.url}/v2/repository/models/simple/${action}`, { method: 'POST' });
        const { error } = (await raw.json()) as { error: string };
        const expected = byStatus[raw.status];
        assert.ok(expected, `unexpected status ${raw.status}`);
        const call = action === 'load' ? client.loadModel('simple') : client.unloadModel('simple');
        await assert.rejects(call, (err: unknown) => {
          assert.ok(err instanceof expected);
          assert.equal((err as Error).message, error);
          return true;
        });
      }
    });

    it('an unreachable server is an UnavailableError', async () => {
      const nowhere = new NereidHttpClient({ url: '127.0.0.1:1' });
      await assert.rejects(nowhere.serverMetadata(), UnavailableError);
    });
  });
});

describe('NereidHttpClient model control (real server, explicit mode)', () => {
  let server: TestServer;
  let client: NereidHttpClient;
  before(async () => {
    server = await startNereid({ modelControlMode: 'explicit' });
    client = new NereidHttpClient({ url: server.url });
  });
  after(async () => {
    await server.close();
  });

  it('loads, infers, unloads', async () => {
    assert.equal(await client.isModelReady('simple'), false);
    await client.loadModel('simple');
    assert.equal(await client.isModelReady('simple'), true);
    assert.equal((await client.infer('simple', simpleInputs())).outputs.length, 2);
    await client.unloadModel('simple');
    assert.equal(await client.isModelReady('simple'), false);
    await assert.rejects(
      client.infer('simple', simpleInputs()),
      (err: unknown) => err instanceof NotFoundError || err instanceof UnavailableError,
    );
  });

  it('loads with an override config given as an object', async () => {
    const config = await (async () => {
      await client.loadModel('classifier');
      return client.modelConfig('classifier');
    })();
    await client.loadModel('classifier', { config: { ...config, max_batch_size: 4 } });
    assert.equal((await client.modelConfig('classifier')).max_batch_size, 4);
  });

  it('BAD CALL - loading an unknown model rejects with a catalogue error and the server message', async () => {
    // The class follows the server's status (INTERNAL today, as Triton's "failed to load"); the client keeps it.
    await assert.rejects(client.loadModel('no_such_model'), (err: unknown) => {
      assert.ok(err instanceof NereidError);
      assert.match(err.message, /no_such_model/);
      return true;
    });
  });
});
