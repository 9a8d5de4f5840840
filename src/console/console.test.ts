import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestTimings } from '../metrics/observer.js';
import { LatencyWindow } from './latency-window.js';
import { LogRing } from './log-ring.js';

describe('LogRing', () => {
  it('keeps the newest lines up to its capacity and returns only lines after a sequence number', () => {
    const ring = new LogRing(3);
    for (let i = 0; i < 5; i++) ring.push(`{"i":${i}}\n`);
    assert.deepEqual(ring.since(), { next: 5, lines: ['{"i":2}', '{"i":3}', '{"i":4}'] });
    assert.deepEqual(ring.since(4).lines, ['{"i":4}']);
    assert.deepEqual(ring.since(5).lines, []);
    // A reader that fell behind further than the ring reaches gets what is still kept.
    assert.deepEqual(ring.since(0).lines, ['{"i":2}', '{"i":3}', '{"i":4}']);
    assert.deepEqual(JSON.parse(ring.json(3)), { next: 5, lines: [{ i: 3 }, { i: 4 }] });
  });

  it('BAD CALL - refuses a capacity that is not a positive integer', () => {
    assert.throws(() => new LogRing(0), RangeError);
  });
});

describe('LatencyWindow', () => {
  const timings = (totalUs: number, queueUs = 0): RequestTimings => ({
    totalNs: totalUs * 1000,
    queueNs: queueUs * 1000,
    computeInputNs: 0,
    computeInferNs: 0,
    computeOutputNs: 0,
  });

  it('gives percentiles of the requests inside the window only', () => {
    let now = 0;
    const w = new LatencyWindow(() => now);
    w.requestSucceeded('old', 1, timings(999_999));
    now = 10_000;
    for (let i = 1; i <= 100; i++) w.requestSucceeded('m', 1, timings(i, i / 10));
    const [m] = w.summary(1000);
    assert.deepEqual(m, {
      model: 'm',
      count: 100,
      p50_us: 50,
      p90_us: 90,
      p99_us: 99,
      queue_p50_us: 5,
      queue_p99_us: 9.9,
    });
    assert.equal(w.summary(1000).length, 1, 'a model with no request in the window is left out');
  });

  it('keeps a bounded number of samples per model', () => {
    const w = new LatencyWindow(() => 0);
    for (let i = 0; i < 10_000; i++) w.requestSucceeded('m', 1, timings(1));
    assert.equal(w.summary(1000)[0].count, 4096);
  });
});
