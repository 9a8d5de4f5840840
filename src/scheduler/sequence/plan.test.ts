import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineRequest } from '../../backends/contract.js';
import { planDirect, planOldest, type Head } from './plan.js';

const req = (cols = 1): EngineRequest => ({
  inputs: [{ name: 'X', datatype: 'INT32', shape: [1, cols], data: new Int32Array(cols) }],
  outputs: ['Y'],
  batchSize: 1,
});
const head = (slot: number, enqueuedAt: number, cols = 1): Head => ({ slot, enqueuedAt, request: req(cols) });
const none = new Set<string>();

describe('planDirect', () => {
  const opts = { delayMs: 0, minUtilization: 0, maxBatchSize: 4, ragged: none };

  it('puts each ready slot in its own row and pads the empty slots below the highest ready one', () => {
    assert.deepEqual(planDirect([undefined, head(1, 0), undefined, head(3, 0)], opts, 10), {
      rows: [null, 1, null, 3],
    });
  });

  it('pads a slot whose request cannot share the batch (different shape); it runs in a later batch', () => {
    assert.deepEqual(planDirect([head(0, 0), head(1, 0, 2)], opts, 10), { rows: [0, null] });
  });

  it('waits for the minimum slot utilization until the oldest request has waited the delay', () => {
    const waiting = { ...opts, delayMs: 5, minUtilization: 0.5 };
    assert.deepEqual(planDirect([head(0, 10)], waiting, 12), { wait: 15 });
    assert.deepEqual(planDirect([head(0, 10)], waiting, 15), { rows: [0] });
    assert.deepEqual(planDirect([head(0, 10), head(1, 11)], waiting, 12), { rows: [0, 1] });
  });

  it('has nothing to run when no slot has a request', () => {
    assert.equal(planDirect([undefined, undefined], opts, 0), null);
  });
});

describe('planOldest', () => {
  const opts = { delayMs: 0, preferred: [4], maxBatchSize: 4, ragged: none, stopping: false };

  it('runs the oldest requests first, up to max_batch_size', () => {
    const heads = [head(0, 5), head(1, 1), head(2, 3), head(3, 2), head(4, 4)];
    assert.deepEqual(planOldest(heads, opts, 10), { rows: [1, 3, 2, 4] });
  });

  it('waits for a preferred size until the delay, then runs what it has', () => {
    const waiting = { ...opts, delayMs: 5 };
    assert.deepEqual(planOldest([head(0, 10), head(1, 11)], waiting, 12), { wait: 15 });
    assert.deepEqual(planOldest([head(0, 10), head(1, 11)], waiting, 15), { rows: [0, 1] });
    assert.deepEqual(planOldest([head(0, 10), head(1, 11)], { ...waiting, stopping: true }, 12), { rows: [0, 1] });
  });

  it('runs a preferred size at once when it is reached before the delay', () => {
    const heads = [head(0, 10), head(1, 11), head(2, 11), head(3, 11)];
    assert.deepEqual(planOldest(heads, { ...opts, delayMs: 1000, preferred: [2, 4] }, 12), { rows: [0, 1, 2, 3] });
    assert.deepEqual(planOldest(heads.slice(0, 3), { ...opts, delayMs: 1000, preferred: [2, 4] }, 12), {
      rows: [0, 1],
    });
  });

  it('leaves out requests whose shapes differ from the oldest one', () => {
    assert.deepEqual(planOldest([head(0, 1), head(1, 2, 3), head(2, 3)], opts, 10), { rows: [0, 2] });
  });
});
