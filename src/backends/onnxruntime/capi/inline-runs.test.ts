import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INLINE_MAX_NS, InlineRuns, PROBE_MAX_NS, REPROBE_AFTER, REPROBE_AFTER_MAX } from './inline-runs.js';

/** The inline-or-pool decision of onnxruntime runs (inline-runs.ts), fed measured run times. */

describe('InlineRuns', () => {
  it('sends a shape never seen to the pool, probes it inline once the pool ran it fast, and keeps it inline', () => {
    const r = new InlineRuns();
    assert.equal(r.inline('a'), false);
    r.observe('a', 60_000, false); // pool: submit to completion, an upper bound
    assert.equal(r.inline('a'), true, 'probe');
    r.observe('a', 9_000, true);
    assert.equal(r.inline('a'), true);
    for (let i = 0; i < 100; i++) r.observe('a', 10_000, true);
    assert.equal(r.inline('a'), true);
    assert.equal(r.inline('b'), false, 'per shape');
  });

  it('probes a few times before a slow first probe sends the shape back to the pool', () => {
    const r = new InlineRuns();
    r.observe('a', 60_000, false);
    r.observe('a', 400_000, true); // a cold first run
    assert.equal(r.inline('a'), true, 'probes again');
    r.observe('a', 9_000, true);
    assert.equal(r.inline('a'), true, 'the fastest probe counts');
    const slow = new InlineRuns();
    slow.observe('s', 100_000, false);
    for (let i = 0; i < 3; i++) {
      assert.equal(slow.inline('s'), true, `probe ${i}`);
      slow.observe('s', 2 * INLINE_MAX_NS, true);
    }
    assert.equal(slow.inline('s'), false, 'three slow probes: pooled');
  });

  it('keeps a shape inline through a run preempted for milliseconds', () => {
    const r = new InlineRuns();
    r.observe('a', 60_000, false);
    for (let i = 0; i < 20; i++) r.observe('a', 15_000, true);
    r.observe('a', 50_000_000, true);
    assert.equal(r.inline('a'), true);
  });

  it('never probes a shape whose pooled runs took long', () => {
    const r = new InlineRuns();
    for (let i = 0; i < 3 * REPROBE_AFTER_MAX; i++) {
      r.observe('long', PROBE_MAX_NS + 1, false);
      assert.equal(r.inline('long'), false);
    }
  });

  it('sends a shape back to the pool when its inline runs get slow, and probes it ever more rarely', () => {
    const r = new InlineRuns();
    r.observe('a', 30_000, false);
    r.observe('a', 10_000, true);
    for (let i = 0; i < 40; i++) r.observe('a', 10 * INLINE_MAX_NS, true);
    assert.equal(r.inline('a'), false, 'the moving average passed the limit');
    /** Pooled runs until the next probe; then the probe's three slow inline runs. */
    const untilProbe = (): number => {
      let n = 0;
      while (!r.inline('a')) {
        r.observe('a', 100_000, false);
        n++;
        assert.ok(n <= REPROBE_AFTER_MAX, 'probed within the bound');
      }
      for (let i = 0; i < 3; i++) r.observe('a', 2 * INLINE_MAX_NS, true);
      return n;
    };
    assert.deepEqual([untilProbe(), untilProbe(), untilProbe()], [REPROBE_AFTER, 2 * REPROBE_AFTER, 4 * REPROBE_AFTER]);
    for (let i = 0; i < 10; i++) untilProbe();
    assert.equal(untilProbe(), REPROBE_AFTER_MAX);
    while (!r.inline('a')) r.observe('a', 100_000, false);
    r.observe('a', 10_000, true);
    assert.equal(r.inline('a'), true, 'the probe starts the average afresh');
    for (let i = 0; i < 40; i++) r.observe('a', 10 * INLINE_MAX_NS, true);
    assert.equal(untilProbe(), REPROBE_AFTER, 'a successful probe brought the interval back');
  });
});
