import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type TestServer } from '../helpers/server.js';
import { batchSizes, cumulative, infer, out, type Reply, sequence, startSequenceServer } from '../helpers/sequence.js';

/**
 * The sequence batcher over HTTP on a real server: implicit state, controls and correlation ids (ONNX models in
 * onnxruntime), slots, backlog, idle timeouts and the oldest strategy (identity models with latency). Refused
 * requests and configs are in sequence-bad-requests.test.ts, gRPC's sequence parameters in sequence-grpc.test.ts.
 */

describe('sequence batcher', () => {
  let s: TestServer;

  before(async () => {
    s = await startSequenceServer([
      'acc',
      'acc_init',
      'acc_dyna',
      'acc_string',
      'controls',
      'slots',
      'single',
      'idle',
      'oldest',
    ]);
  });
  after(async () => {
    await s?.close();
  });

  it('keeps implicit state per sequence: two interleaved sequences accumulate independently (HTTP)', async () => {
    const a = [0, 11, 7, 5, 3];
    const b = [100, -11, -7, -5, -3];
    const got: [number[], number[]] = [[], []];
    for (let i = 0; i < a.length; i++) {
      const flags = { sequence_start: i === 0, sequence_end: i === a.length - 1 };
      const [ra, rb] = await Promise.all([
        infer(s.url, 'acc', a[i], { sequence_id: 1000, ...flags }),
        infer(s.url, 'acc', b[i], { sequence_id: 1001, ...flags }),
      ]);
      got[0].push(out(ra)[0] as number);
      got[1].push(out(rb)[0] as number);
    }
    assert.deepEqual(got[0], cumulative(a));
    assert.deepEqual(got[1], cumulative(b));
    // The state output is the batcher's: a client never sees it.
    const r = await infer(s.url, 'acc', 1, { sequence_id: 1000, sequence_start: true, sequence_end: true });
    assert.deepEqual(
      r.body.outputs?.map((o) => o.name),
      ['OUTPUT'],
    );
  });

  it('START resets the state: the same id starts over after END, and a START mid-sequence restarts it', async () => {
    assert.deepEqual(await sequence(s.url, 'acc', 7, [1, 2, 3]), [1, 3, 6]);
    assert.deepEqual(await sequence(s.url, 'acc', 7, [10, 20]), [10, 30]);
    assert.deepEqual(out(await infer(s.url, 'acc', 5, { sequence_id: 8, sequence_start: true })), [5]);
    assert.deepEqual(out(await infer(s.url, 'acc', 5, { sequence_id: 8, sequence_start: true })), [5]);
    assert.deepEqual(out(await infer(s.url, 'acc', 1, { sequence_id: 8, sequence_end: true })), [6]);
  });

  it('takes the first state from initial_state data_file, on a model without a batch dim', async () => {
    assert.deepEqual(await sequence(s.url, 'acc_init', 3, [1, 2, 3], [1]), [101, 103, 106]);
  });

  it('feeds CORRID as UINT64 (oldest strategy) and as a string', async () => {
    // OUTPUT adds the correlation id on the END request.
    assert.deepEqual(await sequence(s.url, 'acc_dyna', 40, [1, 2, 3]), [1, 3, 6 + 40]);
    assert.deepEqual(await sequence(s.url, 'acc_string', '42', [1, 2, 3]), [1, 3, 6 + 42]);
  });

  it('sends START (fp32), END (bool), READY (int32) and CORRID (uint64) with their configured values', async () => {
    const r1 = await infer(s.url, 'controls', 9, { sequence_id: 77, sequence_start: true });
    assert.deepEqual(
      [out(r1, 'OUT_START'), out(r1, 'OUT_END'), out(r1, 'OUT_READY'), out(r1, 'OUT_CORRID')],
      [[1], [false], [1], [77]],
    );
    const r2 = await infer(s.url, 'controls', 9, { sequence_id: 77 });
    assert.deepEqual([out(r2, 'OUT_START'), out(r2, 'OUT_END')], [[0], [false]]);
    const r3 = await infer(s.url, 'controls', 9, { sequence_id: 77, sequence_end: true });
    assert.deepEqual([out(r3, 'OUT_START'), out(r3, 'OUT_END'), out(r3, 'OUTPUT')], [[0], [true], [9]]);
  });

  it('keeps each sequence in its slot row: a batch pads the slots that have nothing ready', async () => {
    // t=0: A1 runs alone (slot 0). While it runs, B1 (slot 1) and A2 queue: the next batch is [A2, B1].
    // Then B2 alone: [padding, B2], still two rows.
    const a1 = infer(s.url, 'slots', 1, { sequence_id: 'A', sequence_start: true });
    await sleep(50);
    const b1 = infer(s.url, 'slots', 2, { sequence_id: 'B', sequence_start: true });
    const a2 = infer(s.url, 'slots', 3, { sequence_id: 'A', sequence_end: true });
    assert.deepEqual([out(await a1), out(await a2), out(await b1)], [[1], [3], [2]]);
    assert.deepEqual(out(await infer(s.url, 'slots', 4, { sequence_id: 'B', sequence_end: true })), [4]);
    assert.deepEqual(await batchSizes(s.url, 'slots'), { 1: 1, 2: 2 });
  });

  it('backlogs a sequence while every slot is taken, and runs it when a slot frees up', async () => {
    const order: string[] = [];
    const track = (p: Promise<Reply>, tag: string) =>
      p.then((r) => {
        order.push(tag);
        return r;
      });
    const a1 = track(infer(s.url, 'single', 1, { sequence_id: 1, sequence_start: true }), 'A1');
    await sleep(30);
    const b1 = track(infer(s.url, 'single', 2, { sequence_id: 2, sequence_start: true, sequence_end: true }), 'B1');
    await a1;
    await sleep(200);
    // B is still waiting for A's slot; A's END lets it in.
    assert.deepEqual(order, ['A1']);
    const a2 = track(infer(s.url, 'single', 3, { sequence_id: 1, sequence_end: true }), 'A2');
    assert.deepEqual([out(await a2), out(await b1)], [[3], [2]]);
    assert.deepEqual(order, ['A1', 'A2', 'B1']);
  });

  it('BAD REQUEST - a sequence idle past max_sequence_idle_microseconds is gone: its next request needs START', async () => {
    assert.deepEqual(out(await infer(s.url, 'idle', 1, { sequence_id: 55, sequence_start: true })), [1]);
    await sleep(400);
    const r = await infer(s.url, 'idle', 2, { sequence_id: 55 });
    assert.equal(r.status, 400);
    assert.equal(
      r.body.error,
      "inference request for sequence 55 to model 'idle' must specify the START flag on the first request of the sequence",
    );
    // Its slot was freed: a new sequence runs at once on the one-slot model.
    assert.deepEqual(
      out(await infer(s.url, 'idle', 3, { sequence_id: 56, sequence_start: true, sequence_end: true })),
      [3],
    );
  });

  it('oldest: forms a batch of the oldest requests of different sequences up to the preferred size', async () => {
    const rs = await Promise.all(
      [1, 2, 3, 4].map((id) =>
        infer(s.url, 'oldest', id, { sequence_id: id, sequence_start: true, sequence_end: true }),
      ),
    );
    assert.deepEqual(
      rs.map((r) => out(r)[0]),
      [1, 2, 3, 4],
    );
    assert.deepEqual(await batchSizes(s.url, 'oldest'), { 4: 1 });
  });
});
