import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CancelWatch } from './cancel-watch.js';

describe('CancelWatch', () => {
  it('cancels the items still watched when their shared signal aborts, with one listener per signal', () => {
    const cancelled: string[] = [];
    const watch = new CancelWatch<string>((it) => cancelled.push(it));
    const controller = new AbortController();
    let listeners = 0;
    const add = controller.signal.addEventListener.bind(controller.signal);
    controller.signal.addEventListener = ((...args: Parameters<typeof add>) => {
      listeners++;
      return add(...args);
    }) as typeof add;
    watch.watch(controller.signal, 'a');
    watch.watch(controller.signal, 'b');
    watch.watch(controller.signal, 'c');
    watch.unwatch(controller.signal, 'b');
    controller.abort();
    assert.deepEqual(cancelled, ['a', 'c']);
    assert.equal(listeners, 1);
  });

  it('ignores requests without a signal and signals it never saw', () => {
    const watch = new CancelWatch<number>(() => assert.fail('nothing to cancel'));
    watch.watch(undefined, 1);
    watch.unwatch(undefined, 1);
    watch.unwatch(new AbortController().signal, 2);
  });
});
