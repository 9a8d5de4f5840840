import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CustomMetrics } from './custom-metrics.js';

describe('CustomMetrics (Triton custom metric families)', () => {
  it('shares a series between owners with equal labels and drops it with the last reference', () => {
    const store = new CustomMetrics();
    const a = {};
    const b = {};
    const fa = store.createFamily(a, 'x_total', 'x', 'counter');
    const fb = store.createFamily(b, 'x_total', 'x', 'counter');
    const ma = store.createMetric(a, fa, { m: '1', n: '2' });
    const mb = store.createMetric(b, fb, { n: '2', m: '1' });
    store.apply(a, ma, 'increment', 2);
    assert.equal(store.value(b, mb), 2);
    store.release(a);
    assert.equal([...store.families()].length, 1, 'b still holds the family');
    store.apply(b, mb, 'increment', 1);
    assert.equal(store.value(b, mb), 3);
    assert.throws(() => store.value(a, ma), /Metric has been invalidated/);
    store.release(b);
    assert.equal([...store.families()].length, 0);
  });

  it('refuses a second kind for a name, and handles of another owner', () => {
    const store = new CustomMetrics();
    const a = {};
    const f = store.createFamily(a, 'y', 'y', 'gauge');
    assert.throws(() => store.createFamily({}, 'y', 'y', 'counter'), /Family name already exists with different type/);
    assert.throws(() => store.createMetric({}, f, {}), /unknown metric family handle/);
    assert.throws(() => store.createFamily(a, 'bad-name', '', 'gauge'), /Invalid metric name/);
    assert.throws(() => store.createMetric(a, f, { __x: 'v' }), /Invalid label name/);
  });
});
