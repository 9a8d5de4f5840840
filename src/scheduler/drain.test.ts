import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { UnavailableError } from '../core/errors.js';
import { Drain } from './drain.js';

/** Whether `p` settled by the end of this turn's microtasks. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

type Op = 'begin' | 'end' | 'queue' | 'dequeue' | 'check' | 'stop';

const cases: { name: string; ops: Op[]; drained: boolean }[] = [
  { name: 'an idle scheduler drains at once', ops: ['stop'], drained: true },
  { name: 'a running batch holds the stop', ops: ['begin', 'stop'], drained: false },
  { name: 'until it ends', ops: ['begin', 'stop', 'end'], drained: true },
  { name: 'a queued request holds the stop', ops: ['queue', 'stop'], drained: false },
  {
    name: 'until it leaves the queue and the scheduler checks',
    ops: ['queue', 'stop', 'dequeue', 'check'],
    drained: true,
  },
  {
    name: 'a queued request that became a batch holds it',
    ops: ['queue', 'stop', 'dequeue', 'begin', 'check'],
    drained: false,
  },
  { name: 'every batch must end', ops: ['begin', 'begin', 'stop', 'end'], drained: false },
  { name: 'work that ended before the stop holds nothing', ops: ['begin', 'end', 'check', 'stop'], drained: true },
  {
    name: 'work accepted after the stop, while draining, is waited for',
    ops: ['begin', 'stop', 'queue', 'end'],
    drained: false,
  },
];

describe('Drain', () => {
  for (const c of cases) {
    it(c.name, async () => {
      let queued = 0;
      const drain = new Drain(() => queued);
      let done: Promise<void> | undefined;
      for (const op of c.ops) {
        if (op === 'begin') drain.begin();
        else if (op === 'end') drain.end();
        else if (op === 'queue') queued++;
        else if (op === 'dequeue') queued--;
        else if (op === 'check') drain.check();
        else done = drain.stop();
      }
      assert.equal(await settled(done as Promise<void>), c.drained);
      assert.equal(drain.stopping, true);
    });
  }

  it('check() says whether it is drained, and never before stop()', () => {
    const drain = new Drain(() => 0);
    assert.equal(drain.check(), false);
    assert.equal(drain.stopping, false);
    void drain.stop();
    assert.equal(drain.check(), true);
    drain.begin();
    assert.equal(drain.check(), false);
  });

  it('stop() is idempotent: every call gets the one promise', () => {
    const drain = new Drain(() => 0);
    assert.equal(drain.stop(), drain.stop());
  });

  it('refuses new work after the stop as Triton does while unloading', async () => {
    await assert.rejects(new Drain(() => 0).refusal(), (e) => {
      assert.ok(e instanceof UnavailableError);
      assert.equal(e.message, 'model is being unloaded');
      return true;
    });
  });
});
