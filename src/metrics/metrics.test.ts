import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { Registry } from 'prom-client';
import { ModelStats } from '../core/stats.js';
import { startMetricsServer, type RunningMetricsServer } from './server.js';
import type { ModelSeries } from './source.js';

/** A source the test edits directly: the versions "served" right now. */
function fakeSource(): { series: ModelSeries[]; source: { models(): ModelSeries[] } } {
  const series: ModelSeries[] = [];
  return { series, source: { models: () => series } };
}

const timings = (ms: number) => ({ computeInputNs: 0, computeInferNs: ms * 1e6, computeOutputNs: 0 });

/** The server facade's order: recordSuccess, then the observer hook. */
function succeed(m: RunningMetricsServer | undefined, s: ModelSeries, ms: number): void {
  s.stats.recordSuccess(1, ms * 1e6, 0, timings(ms));
  m?.observer.requestSucceeded(s.name, s.version, {
    totalNs: ms * 1e6,
    queueNs: 0,
    computeInputNs: 0,
    computeInferNs: ms * 1e6,
    computeOutputNs: 0,
  });
}

type Values = { labels: Record<string, string | number>; value: number; metricName?: string }[];

async function family(registry: Registry, name: string): Promise<Values | undefined> {
  const all = await registry.getMetricsAsJSON();
  return all.find((f) => f.name === name)?.values as Values | undefined;
}

const find = (values: Values, metricName: string, labels: Record<string, string | number>) =>
  values.find(
    (v) => (v.metricName ?? '') === metricName && Object.entries(labels).every(([k, x]) => v.labels[k] === x),
  );

describe('metrics families over a MetricsSource', () => {
  const servers: RunningMetricsServer[] = [];
  const start = async (source: { models(): ModelSeries[] }, config: string[] = []) => {
    const m = await startMetricsServer(source, { port: 0, host: '127.0.0.1', allowCpuMetrics: false, config });
    servers.push(m);
    return m;
  };
  after(() => Promise.all(servers.map((m) => m.close())));

  it('adds a _<key> label per simple metric_tags entry and skips keys that cannot be label names', async () => {
    const { series, source } = fakeSource();
    series.push({
      name: 'm',
      version: 2,
      stats: new ModelStats(),
      pending: 4,
      healthyInstances: 1,
      instances: 1,
      metricTags: { team: 'search', 'bad-key': 'x', _hidden: 'y' },
    });
    const m = await start(source);
    const [v] = (await family(m.registry, 'nv_inference_pending_request_count')) ?? [];
    assert.deepEqual(v.labels, { model: 'm', version: '2', _team: 'search' });
    assert.equal(v.value, 4);
  });

  it('reports the load time once the source has it, and drops a version no longer served', async () => {
    const { series, source } = fakeSource();
    series.push({
      name: 'a',
      version: 1,
      stats: new ModelStats(),
      pending: 0,
      healthyInstances: 1,
      instances: 1,
      loadSeconds: 1.5,
    });
    series.push({ name: 'b', version: 1, stats: new ModelStats(), pending: 0, healthyInstances: 1, instances: 1 });
    const m = await start(source, ['summary_latencies=true']);
    assert.deepEqual(
      (await family(m.registry, 'nv_model_load_duration_secs'))?.map((v) => [v.labels.model, v.value]),
      [['a', 1.5]],
    );
    series.splice(0, 1);
    for (const name of ['nv_inference_request_success', 'nv_inference_request_summary_us']) {
      const models = new Set((await family(m.registry, name))?.map((v) => v.labels.model));
      assert.deepEqual([...models], ['b'], name);
    }
  });

  it('summaries: with the hook, quantiles are per request', async () => {
    const { series, source } = fakeSource();
    const s: ModelSeries = {
      name: 'm',
      version: 1,
      stats: new ModelStats(),
      pending: 0,
      healthyInstances: 1,
      instances: 1,
    };
    series.push(s);
    const m = await start(source, ['summary_latencies=true', 'summary_quantiles=0.5:0.05,0.99:0.001']);
    for (let i = 1; i <= 100; i++) succeed(m, s, i); // 1..100 ms
    const v = (await family(m.registry, 'nv_inference_request_summary_us')) ?? [];
    assert.equal(find(v, 'nv_inference_request_summary_us_count', {})?.value, 100);
    assert.ok(Math.abs((find(v, 'nv_inference_request_summary_us_sum', {})?.value ?? 0) - 5050e3) < 1);
    const p50 = find(v, '', { quantile: 0.5 })?.value ?? 0;
    const p99 = find(v, '', { quantile: 0.99 })?.value ?? 0;
    assert.ok(p50 > 40e3 && p50 < 60e3, `p50 ${p50}`);
    assert.ok(p99 > 95e3, `p99 ${p99}`);
    assert.equal(
      v.filter((x) => x.labels.quantile !== undefined).length,
      2,
      'one value per configured quantile, for one series',
    );
  });

  it('summaries: without the hook, count and sum still equal ModelStats (fed from deltas per scrape)', async () => {
    const { series, source } = fakeSource();
    const s: ModelSeries = {
      name: 'm',
      version: 1,
      stats: new ModelStats(),
      pending: 0,
      healthyInstances: 1,
      instances: 1,
    };
    series.push(s);
    const m = await start(source, ['summary_latencies=true', 'histogram_latencies=true']);
    succeed(undefined, s, 10);
    succeed(undefined, s, 30);
    let v = (await family(m.registry, 'nv_inference_compute_infer_summary_us')) ?? [];
    assert.equal(find(v, 'nv_inference_compute_infer_summary_us_count', {})?.value, 2);
    assert.equal(find(v, '', { quantile: 0.5 })?.value, 20e3, 'the mean of the interval');
    // A hooked request after un-hooked ones: only the un-hooked are fed from the totals.
    succeed(m, s, 1000);
    succeed(undefined, s, 50);
    v = (await family(m.registry, 'nv_inference_compute_infer_summary_us')) ?? [];
    assert.equal(find(v, 'nv_inference_compute_infer_summary_us_count', {})?.value, 4);
    assert.ok(Math.abs((find(v, 'nv_inference_compute_infer_summary_us_sum', {})?.value ?? 0) - 1090e3) < 1);
    const h = (await family(m.registry, 'nv_inference_first_response_histogram_ms')) ?? [];
    assert.deepEqual(
      h.filter((x) => x.metricName?.endsWith('_bucket')).map((x) => [x.labels.le, x.value]),
      [
        [100, 3],
        [500, 3],
        [2000, 4],
        [5000, 4],
        ['+Inf', 4],
      ],
    );
  });
});
