import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MessageChannel } from 'node:worker_threads';
import { AnswerSpin, MISSES_TO_REST, REST_POSTS, SPIN_MIN_CORES } from './answer-spin.js';

/** A front-end thread's spin for its answers (answer-spin.ts), on a channel of this thread. */

function setup(waiting = true, cores = SPIN_MIN_CORES) {
  const { port1, port2 } = new MessageChannel();
  const handled: unknown[][] = [];
  const events: unknown[][] = [];
  port1.on('message', (m: unknown[]) => events.push(m));
  const spin = new AnswerSpin(
    port1,
    (m) => handled.push(m),
    () => waiting,
    cores,
  );
  const close = (): void => {
    port1.close();
    port2.close();
  };
  return { spin, port2, handled, events, close };
}

describe('AnswerSpin', () => {
  it('handles the answers that are there itself, in order, before any message event', () => {
    const { spin, port2, handled, events, close } = setup();
    port2.postMessage(['a']);
    port2.postMessage(['b']);
    spin.afterPost();
    assert.deepEqual(handled, [['a'], ['b']]);
    assert.deepEqual(events, []);
    assert.deepEqual(spin.counts, { hits: 1, misses: 0 });
    close();
  });

  it('spins only with answers due, and rests after a few spins that saw nothing', () => {
    const idle = setup(false);
    idle.spin.afterPost();
    assert.deepEqual(idle.spin.counts, { hits: 0, misses: 0 }, 'nothing in flight: no spin');
    idle.close();
    const { spin, port2, handled, close } = setup();
    for (let i = 0; i < MISSES_TO_REST; i++) spin.afterPost();
    assert.deepEqual(spin.counts, { hits: 0, misses: MISSES_TO_REST });
    port2.postMessage(['late']);
    for (let i = 0; i < REST_POSTS; i++) spin.afterPost();
    assert.deepEqual(handled, [], 'resting: the message is left to the event');
    assert.deepEqual(spin.counts, { hits: 0, misses: MISSES_TO_REST });
    spin.afterPost();
    assert.deepEqual(handled, [['late']], 'spinning again after the rest');
    close();
  });

  it('never spins on a machine with fewer cores than it needs', () => {
    const { spin, port2, handled, close } = setup(true, SPIN_MIN_CORES - 1);
    port2.postMessage(['a']);
    spin.afterPost();
    assert.deepEqual(handled, []);
    assert.deepEqual(spin.counts, { hits: 0, misses: 0 });
    close();
  });
});
