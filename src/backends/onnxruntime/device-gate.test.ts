import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DeviceGate } from './device-gate.js';

describe('DeviceGate (captures alone, other GPU work shared)', () => {
  it('a capture waits for the shared entries in flight; later shared entries wait behind it', async () => {
    const gate = new DeviceGate();
    const order: string[] = [];
    const run = gate.tryShared();
    assert.ok(run, 'shared entries need no promise while nothing captures');
    const capture = gate.enter(true).then((release) => (order.push('capture'), release));
    assert.equal(gate.tryShared(), undefined, 'a waiting capture goes first');
    const later = gate.enter(false).then((release) => (order.push('later run'), release));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, []);
    run();
    run(); // idempotent
    const releaseCapture = await capture;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, ['capture']);
    releaseCapture();
    (await later)();
    assert.deepEqual(order, ['capture', 'later run']);
    assert.equal(gate.waits, 2);
    assert.ok(gate.tryShared());
  });

  it('an aborted waiter leaves the queue and lets the next in', async () => {
    const gate = new DeviceGate();
    const release = await gate.enter(true);
    const ac = new AbortController();
    const aborted = gate.enter(true, ac.signal);
    const next = gate.enter(false);
    ac.abort();
    await assert.rejects(aborted, { code: 'CANCELLED' });
    release();
    (await next)();
  });
});
