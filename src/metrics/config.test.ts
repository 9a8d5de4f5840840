import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgError } from '../core/errors.js';
import { DEFAULT_METRICS_CONFIG, parseMetricsConfig } from './config.js';

describe('parseMetricsConfig', () => {
  it("defaults to Triton's: counters on, summaries and histogram off, four quantiles", () => {
    assert.deepEqual(parseMetricsConfig([]), DEFAULT_METRICS_CONFIG);
    assert.deepEqual(
      DEFAULT_METRICS_CONFIG.summaryQuantiles.map((q) => [q.quantile, q.error]),
      [
        [0.5, 0.05],
        [0.9, 0.01],
        [0.95, 0.001],
        [0.99, 0.001],
      ],
    );
    assert.ok(Object.isFrozen(parseMetricsConfig([])));
  });

  it("reads Triton's keys and boolean spellings; a later entry wins", () => {
    const c = parseMetricsConfig([
      'counter_latencies=false',
      'summary_latencies=TRUE',
      'histogram_latencies=1',
      'histogram_latencies=off',
      'summary_quantiles=0.5:0.05,0.999:0.0001',
    ]);
    assert.equal(c.counterLatencies, false);
    assert.equal(c.summaryLatencies, true);
    assert.equal(c.histogramLatencies, false);
    assert.deepEqual(c.summaryQuantiles, [
      { quantile: 0.5, error: 0.05 },
      { quantile: 0.999, error: 0.0001 },
    ]);
  });

  it('BAD CONFIG - an unknown key is an InvalidArgError naming it', () => {
    assert.throws(
      () => parseMetricsConfig(['summary_latency=true']),
      (e: unknown) => e instanceof InvalidArgError && /unknown key 'summary_latency'/.test(e.message),
    );
  });

  it('BAD CONFIG - rejects a bad boolean, a missing =, and bad quantile pairs', () => {
    assert.throws(() => parseMetricsConfig(['counter_latencies=maybe']), /counter_latencies must be true or false/);
    assert.throws(() => parseMetricsConfig(['counter_latencies']), /expects <key>=<value>/);
    assert.throws(() => parseMetricsConfig(['=true']), /expects <key>=<value>/);
    for (const bad of ['0.5', '1.5:0.1', '0.5:-1', '0.5:0.1:2', '0.5:0.05,', 'a:b']) {
      assert.throws(() => parseMetricsConfig([`summary_quantiles=${bad}`]), InvalidArgError, bad);
    }
  });
});
