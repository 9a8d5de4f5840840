import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { joinInputs, splitOutputs } from '../backends/batching.js';
import type { EngineRequest, Execute, Instance, InstanceSpec } from '../backends/contract.js';
import { InstancePool } from '../backends/runtime/pool.js';
import { noopLogger } from '../core/logger.js';
import type { ModelDynamicBatching } from '../config/model-config.js';
import { CancelledError, InvalidArgError, UnavailableError } from '../core/errors.js';
import { ModelStats } from '../core/stats.js';
import { DynamicBatcher } from './dynamic.js';

/**
 * Test double of an instance, for policy tests: echoes INPUT0 as OUTPUT0 (the batch joined and split with the
 * engines' helpers); each execution waits until `release()`.
 */
class FakeGatedInstance implements Instance {
  readonly name: string;
  readonly seen: { inputs: EngineRequest['inputs'] }[] = [];
  readonly died = new Promise<Error>(() => {});
  #gates: (() => void)[] = [];
  constructor(name = 'fake') {
    this.name = name;
  }
  readonly execute: Execute = async (requests, responder) => {
    const inputs = joinInputs(requests);
    this.seen.push({ inputs });
    await new Promise<void>((r) => this.#gates.push(r));
    const x = inputs[0];
    const data = (x.data as Int32Array).slice();
    const outputs = ['OUTPUT0'].map((name) => ({ name, datatype: x.datatype, shape: [...x.shape], data }));
    splitOutputs(requests, outputs).forEach((r, i) => responder.send(i, r, { final: true }));
    return { computeInputNs: 0, computeInferNs: 1, computeOutputNs: 0 };
  };
  /** Lets the oldest running execution finish. */
  release(): void {
    this.#gates.shift()?.();
  }
  async destroy(): Promise<void> {}
}

const req = (rows: number, value: number, cols = 2): EngineRequest => ({
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [rows, cols], data: new Int32Array(rows * cols).fill(value) }],
  outputs: ['OUTPUT0'],
  batchSize: rows,
});

async function batcher(batching: ModelDynamicBatching, instances: FakeGatedInstance[], maxBatchSize = 8) {
  const stats = new ModelStats();
  const specs = instances.map((f, i): InstanceSpec => ({
    name: f.name,
    index: i,
    kind: 'KIND_CPU',
    device: -1,
    profiles: [],
  }));
  const pool = await InstancePool.create(
    { createInstance: async (spec) => instances[spec.index], unload: async () => {} },
    specs,
    { logger: noopLogger },
  );
  return { b: new DynamicBatcher({ stats, maxBatchSize, pool }, { batching }), stats };
}

const tick = () => new Promise((r) => setImmediate(r));
const rows = (r: { inputs: EngineRequest['inputs'] }) => r.inputs[0].shape[0];

describe('DynamicBatcher', () => {
  it('starts the next batch on a freed instance before it answers the batch that freed it', async () => {
    // An engine answering batch N while its instance idles until every answer is written wasted the GPU: the
    // instance goes back to the pool, and the queue's next batch is dispatched, before any member of N settles.
    const inst = new FakeGatedInstance();
    const { b } = await batcher({}, [inst], 4);
    const order: string[] = [];
    const first = b.enqueue(req(1, 1)).then(() => order.push(`answered batch 1 (${inst.seen.length} started)`));
    await tick();
    const second = b.enqueue(req(1, 2)).then(() => order.push('answered batch 2'));
    await tick();
    assert.equal(inst.seen.length, 1, 'the second request waits for the busy instance');
    inst.release();
    await first;
    assert.deepEqual(order, ['answered batch 1 (2 started)'], 'batch 2 was started before batch 1 was answered');
    inst.release();
    await second;
  });

  it('merges requests queued while the instance is busy, up to max_batch_size', async () => {
    const inst = new FakeGatedInstance();
    const { b, stats } = await batcher({}, [inst], 4);
    const first = b.enqueue(req(1, 0));
    await tick();
    const rest = [1, 2, 3, 4, 5].map((v) => b.enqueue(req(1, v)));
    await tick();
    inst.release();
    await first;
    await tick();
    assert.equal(rows(inst.seen[1]), 4, 'second batch is full');
    inst.release();
    await tick();
    inst.release();
    const results = await Promise.all(rest);
    assert.deepEqual(
      results.map((r) => (r.outputs[0].data as Int32Array)[0]),
      [1, 2, 3, 4, 5],
      'each request gets its own rows back',
    );
    assert.deepEqual(
      results.map((r) => r.executedBatchSize),
      [4, 4, 4, 4, 1],
    );
    assert.deepEqual([...stats.batches.keys()].sort(), [1, 4]);
  });

  it('sends a preferred batch size at once, without waiting for the queue delay', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ preferred_batch_size: [2], max_queue_delay_microseconds: 10_000_000 }, [inst]);
    const ps = [b.enqueue(req(1, 1)), b.enqueue(req(1, 2)), b.enqueue(req(1, 3))];
    await tick();
    assert.equal(inst.seen.length, 1);
    assert.equal(rows(inst.seen[0]), 2);
    inst.release();
    await Promise.all(ps.slice(0, 2));
    void b.stop(); // not awaited: stop() waits for the third, which runs at stop without waiting 10 s
    await tick();
    inst.release();
    await ps[2];
  });

  it('waits max_queue_delay_microseconds for a fuller batch, then sends what it has', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ max_queue_delay_microseconds: 50_000 }, [inst]);
    const t0 = performance.now();
    const ps = [b.enqueue(req(1, 1)), b.enqueue(req(1, 2))];
    // Lower bounds only (load makes timers late, never early): the batch runs no sooner than the delay.
    while (inst.seen.length === 0) await sleep(1);
    const waited = performance.now() - t0;
    assert.ok(waited >= 49, `ran after ${waited.toFixed(0)} ms, before the 50 ms delay`);
    assert.equal(inst.seen.length, 1);
    assert.equal(rows(inst.seen[0]), 2);
    inst.release();
    await Promise.all(ps);
  });

  it('serves priority 1 before the default level', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ priority_levels: 2, default_priority_level: 2 }, [inst], 1);
    const block = b.enqueue(req(1, 0));
    await tick();
    const low = b.enqueue(req(1, 1));
    const high = b.enqueue(req(1, 2), { priority: 1 });
    await tick();
    inst.release();
    await block;
    await tick();
    assert.equal((inst.seen[1].inputs[0].data as Int32Array)[0], 2);
    inst.release();
    await tick();
    inst.release();
    await Promise.all([low, high]);
  });

  it('BAD CALL - rejects a priority above priority_levels', async () => {
    const { b } = await batcher({ priority_levels: 2 }, [new FakeGatedInstance()]);
    await assert.rejects(b.enqueue(req(1, 1), { priority: 3 }), InvalidArgError);
  });

  it('BAD CALL - refuses a request over max_queue_size with "Exceeds maximum queue size"', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ default_queue_policy: { max_queue_size: 1 } }, [inst], 1);
    const block = b.enqueue(req(1, 0));
    await tick();
    const queued = b.enqueue(req(1, 1));
    await assert.rejects(b.enqueue(req(1, 2)), (e: unknown) => {
      assert.ok(e instanceof UnavailableError);
      assert.match(e.message, /Exceeds maximum queue size/);
      return true;
    });
    inst.release();
    await block;
    await tick();
    inst.release();
    await queued;
  });

  it('BAD CALL - REJECT timeout answers "Request timeout expired" on time while the instance is busy', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ default_queue_policy: { default_timeout_microseconds: 30_000 } }, [inst], 1);
    const block = b.enqueue(req(1, 0));
    await tick();
    const t0 = performance.now();
    await assert.rejects(b.enqueue(req(1, 1)), /Request timeout expired/);
    const waited = performance.now() - t0;
    // The instance stays busy throughout, so only the timeout can answer it. The upper bound (against a coarse
    // timeout check) is ~30 times the normal 30 ms, which a loaded machine's late timers do not reach.
    assert.ok(waited >= 29 && waited < 1000, `fired after ${waited} ms`);
    inst.release();
    await block;
  });

  it('a request timeout shortens the default only with allow_timeout_override, never lengthens it', async () => {
    const inst = new FakeGatedInstance();
    const policy = { default_timeout_microseconds: 60_000, allow_timeout_override: true };
    const { b } = await batcher({ default_queue_policy: policy }, [inst], 1);
    const block = b.enqueue(req(1, 0));
    await tick();
    const t0 = performance.now();
    const order: string[] = [];
    // `long` first: were `short` not shortened (both 60 ms), `long` would expire first. The order is load-proof.
    const long = b
      .enqueue(req(1, 2), { timeoutUs: 10_000_000 })
      .catch(() => (order.push('long'), performance.now() - t0));
    const short = b
      .enqueue(req(1, 1), { timeoutUs: 10_000 })
      .catch(() => (order.push('short'), performance.now() - t0));
    const [, l] = await Promise.all([short, long]);
    assert.deepEqual(order, ['short', 'long'], 'the 10 ms request timeout shortened the 60 ms default');
    // Capped at the 60 ms default, not lengthened to 10 s: 5 s is far above normal, far below the 10 s.
    assert.ok((l as number) >= 59 && (l as number) < 5000, `long capped at the default: ${l}`);
    inst.release();
    await block;
  });

  it('DELAY timeout keeps the request but serves it after requests still within their timeout', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher(
      { default_queue_policy: { default_timeout_microseconds: 10_000, timeout_action: 'DELAY' } },
      [inst],
      1,
    );
    const block = b.enqueue(req(1, 0));
    await tick();
    const late = b.enqueue(req(1, 1));
    await sleep(30);
    const fresh = b.enqueue(req(1, 2));
    await tick();
    inst.release();
    await block;
    await tick();
    assert.equal((inst.seen[1].inputs[0].data as Int32Array)[0], 2, 'the fresh request goes first');
    inst.release();
    await tick();
    inst.release();
    await Promise.all([late, fresh]);
  });

  it('does not merge requests whose non-batch dims differ', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({}, [inst]);
    const block = b.enqueue(req(1, 0));
    await tick();
    const ps = [b.enqueue(req(1, 1, 2)), b.enqueue(req(1, 2, 3))];
    await tick();
    inst.release();
    await block;
    await tick();
    assert.deepEqual(inst.seen[1].inputs[0].shape, [1, 2]);
    inst.release();
    await tick();
    assert.deepEqual(inst.seen[2].inputs[0].shape, [1, 3]);
    inst.release();
    await Promise.all(ps);
  });

  it('a request cancelled while queued leaves the queue and is answered CANCELLED', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({}, [inst], 1);
    const block = b.enqueue(req(1, 0));
    await tick();
    const ac = new AbortController();
    const p = b.enqueue(req(1, 1), { signal: ac.signal });
    await tick();
    assert.equal(b.pending, 1);
    ac.abort();
    await assert.rejects(p, CancelledError);
    assert.equal(b.pending, 0);
    inst.release();
    await block;
    assert.equal(inst.seen.length, 1, 'the cancelled request never ran');
  });

  it('preserve_ordering answers in arrival order across instances', async () => {
    const i1 = new FakeGatedInstance('a');
    const i2 = new FakeGatedInstance('b');
    const { b } = await batcher({ preserve_ordering: true }, [i1, i2], 1);
    const order: number[] = [];
    const p1 = b.enqueue(req(1, 1)).then(() => order.push(1));
    const p2 = b.enqueue(req(1, 2)).then(() => order.push(2));
    await tick();
    i2.release(); // the second finishes first ...
    await sleep(5);
    assert.deepEqual(order, [], '... but waits for the first');
    i1.release();
    await Promise.all([p1, p2]);
    assert.deepEqual(order, [1, 2]);
  });

  it('stop() runs what is queued, then refuses new requests', async () => {
    const inst = new FakeGatedInstance();
    const { b } = await batcher({ max_queue_delay_microseconds: 10_000_000 }, [inst]);
    const p = b.enqueue(req(1, 1));
    await tick();
    const stopped = b.stop();
    await tick();
    inst.release();
    await p;
    await stopped;
    await assert.rejects(b.enqueue(req(1, 2)), UnavailableError);
  });
});
