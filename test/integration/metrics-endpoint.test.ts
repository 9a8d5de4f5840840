import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { InvalidArgError } from '../../src/core/errors.js';
import { metricsSourceFrom, startMetricsServer, type RunningMetricsServer } from '../../src/metrics/index.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/** One sample line of the Prometheus text format. */
interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses Prometheus text exposition: `# TYPE` lines and samples (label values here never hold `",`). */
function parseExposition(text: string): { types: Map<string, string>; samples: PromSample[] } {
  const types = new Map<string, string>();
  const samples: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      types.set(name, type);
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { types, samples };
}

function get(url: string, method = 'GET', fresh = false): Promise<{ status: number; type?: string; body: string }> {
  return new Promise((resolve, reject) => {
    // fresh: a new connection rather than one kept alive by the global agent.
    const req = request(url, { method, ...(fresh ? { agent: false } : {}) }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], body }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function scrape(m: RunningMetricsServer): Promise<ReturnType<typeof parseExposition>> {
  const res = await get(`http://127.0.0.1:${m.port}/metrics`);
  assert.equal(res.status, 200);
  assert.equal(res.type, m.registry.contentType);
  return parseExposition(res.body);
}

/** The one sample of `name` whose labels include `labels`. */
function value(samples: PromSample[], name: string, labels: Record<string, string>): number | undefined {
  const hits = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.ok(hits.length <= 1, `${name} ${JSON.stringify(labels)} matches ${hits.length} samples`);
  return hits[0]?.value;
}

async function inferSimple(url: string, batch: number): Promise<void> {
  const data = (f: (i: number) => number) => Array.from({ length: 16 * batch }, (_, i) => f(i));
  const res = await fetch(`${url}/v2/models/simple/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [batch, 16], datatype: 'INT32', data: data((i) => i) },
        { name: 'INPUT1', shape: [batch, 16], datatype: 'INT32', data: data(() => 1) },
      ],
    }),
  });
  assert.equal(res.status, 200, await res.text());
}

/** Passes validation (each input's dims are [-1, -1]) but onnxruntime cannot broadcast 4 by 6: a BACKEND failure. */
async function inferFailing(url: string): Promise<void> {
  const ids = (n: number, v: number) => ({ shape: [1, n], datatype: 'INT32', data: Array<number>(n).fill(v) });
  const res = await fetch(`${url}/v2/models/text_encoder/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      inputs: [
        { name: 'input_ids', ...ids(4, 1) },
        { name: 'attention_mask', ...ids(5, 1) },
        { name: 'token_type_ids', ...ids(6, 0) },
      ],
    }),
  });
  assert.equal(res.status, 500, await res.text());
}

const DURATIONS = [
  'nv_inference_request_duration_us',
  'nv_inference_queue_duration_us',
  'nv_inference_compute_input_duration_us',
  'nv_inference_compute_infer_duration_us',
  'nv_inference_compute_output_duration_us',
];
const SUMMARIES = [
  'nv_inference_request_summary_us',
  'nv_inference_queue_summary_us',
  'nv_inference_compute_input_summary_us',
  'nv_inference_compute_infer_summary_us',
  'nv_inference_compute_output_summary_us',
];

describe('metrics endpoint (real server, simple/text_encoder models)', () => {
  let nereid: TestServer;
  const metrics: RunningMetricsServer[] = [];
  const startMetrics = async (config: string[] = [], allowCpuMetrics = true) => {
    const m = await startMetricsServer(metricsSourceFrom(nereid.server), {
      host: '127.0.0.1',
      port: 0,
      intervalMs: 50,
      config,
      allowCpuMetrics,
    });
    metrics.push(m);
    return m;
  };
  let plain: RunningMetricsServer;
  let detailed: RunningMetricsServer;

  before(async () => {
    nereid = await startNereid();
    plain = await startMetrics();
    detailed = await startMetrics([
      'summary_latencies=true',
      'histogram_latencies=true',
      'summary_quantiles=0.5:0.05,0.99:0.001',
    ]);
    for (const batch of [1, 2, 3]) await inferSimple(nereid.url, batch);
    await inferFailing(nereid.url);
    // Two sampling intervals, so nv_cpu_utilization has a delta.
    await new Promise((r) => setTimeout(r, 150));
  });
  after(async () => {
    await Promise.all(metrics.map((m) => m.close()));
    await nereid?.close();
  });

  it('counts requests, inferences (batch sizes summed) and executions per model and version', async () => {
    const { samples } = await scrape(plain);
    const simple = { model: 'simple', version: '1' };
    assert.equal(value(samples, 'nv_inference_request_success', simple), 3);
    assert.equal(value(samples, 'nv_inference_count', simple), 1 + 2 + 3);
    assert.equal(value(samples, 'nv_inference_exec_count', simple), 3);
    for (const reason of ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']) {
      assert.equal(value(samples, 'nv_inference_request_failure', { ...simple, reason }), 0);
    }
    const encoder = { model: 'text_encoder', version: '1' };
    assert.equal(value(samples, 'nv_inference_request_failure', { ...encoder, reason: 'BACKEND' }), 1);
    assert.equal(value(samples, 'nv_inference_request_failure', { ...encoder, reason: 'OTHER' }), 0);
    assert.equal(value(samples, 'nv_inference_request_success', encoder), 0);
    assert.equal(value(samples, 'nv_inference_pending_request_count', simple), 0);
    // A served model with no traffic is exported at zero, as Triton does.
    assert.equal(value(samples, 'nv_inference_request_success', { model: 'classifier', version: '1' }), 0);
  });

  it("exports Triton's types and exactly the labels model, version (and reason)", async () => {
    const { types, samples } = await scrape(plain);
    for (const name of [
      'nv_inference_request_success',
      'nv_inference_request_failure',
      'nv_inference_count',
      'nv_inference_exec_count',
      ...DURATIONS,
    ]) {
      assert.equal(types.get(name), 'counter', name);
    }
    for (const name of ['nv_inference_pending_request_count', 'nv_model_load_duration_secs', 'nv_cpu_utilization']) {
      assert.equal(types.get(name), 'gauge', name);
    }
    for (const s of samples.filter((x) => x.name.startsWith('nv_inference_'))) {
      const keys = Object.keys(s.labels).sort();
      const want = s.name === 'nv_inference_request_failure' ? ['model', 'reason', 'version'] : ['model', 'version'];
      assert.deepEqual(keys, want, s.name);
    }
  });

  it('cumulative latency counters are on by default and consistent', async () => {
    const { samples } = await scrape(plain);
    const simple = { model: 'simple', version: '1' };
    const total = value(samples, 'nv_inference_request_duration_us', simple) ?? 0;
    const infer = value(samples, 'nv_inference_compute_infer_duration_us', simple) ?? 0;
    assert.ok(total > 0 && infer > 0 && infer <= total, `total ${total} infer ${infer}`);
    for (const name of DURATIONS) assert.ok(Number.isInteger(value(samples, name, simple)), name);
  });

  it('summaries and the first-response histogram appear only when configured', async () => {
    const { types } = await scrape(plain);
    for (const name of [...SUMMARIES, 'nv_inference_first_response_histogram_ms']) assert.ok(!types.has(name), name);

    const { types: t2, samples } = await scrape(detailed);
    const simple = { model: 'simple', version: '1' };
    for (const name of SUMMARIES) {
      assert.equal(t2.get(name), 'summary', name);
      assert.equal(value(samples, `${name}_count`, simple), 3, name);
      const quantiles = samples.filter((s) => s.name === name && s.labels.model === 'simple');
      assert.deepEqual(
        quantiles.map((s) => s.labels.quantile),
        ['0.5', '0.99'],
      );
    }
    // _sum in µs matches the cumulative counter (the counter truncates to whole µs).
    const sum = value(samples, 'nv_inference_request_summary_us_sum', simple) ?? 0;
    assert.equal(Math.floor(sum), value((await scrape(plain)).samples, 'nv_inference_request_duration_us', simple));

    assert.equal(t2.get('nv_inference_first_response_histogram_ms'), 'histogram');
    const buckets = samples
      .filter((s) => s.name === 'nv_inference_first_response_histogram_ms_bucket' && s.labels.model === 'simple')
      .map((s) => s.labels.le);
    assert.deepEqual(buckets, ['100', '500', '2000', '5000', '+Inf']);
    assert.equal(value(samples, 'nv_inference_first_response_histogram_ms_count', simple), 3);
  });

  it('counter_latencies=false removes the duration counters', async () => {
    const m = await startMetrics(['counter_latencies=false'], false);
    const { types } = await scrape(m);
    for (const name of DURATIONS) assert.ok(!types.has(name), name);
    assert.equal(types.get('nv_inference_request_success'), 'counter');
  });

  it('CPU and memory gauges carry no labels and hold sane values', { skip: process.platform !== 'linux' }, async () => {
    const { samples } = await scrape(plain);
    const one = (name: string): PromSample => {
      const hits = samples.filter((s) => s.name === name);
      assert.equal(hits.length, 1, name);
      assert.deepEqual(hits[0].labels, {}, name);
      return hits[0];
    };
    const util = one('nv_cpu_utilization').value;
    const total = one('nv_cpu_memory_total_bytes').value;
    const used = one('nv_cpu_memory_used_bytes').value;
    assert.ok(util >= 0 && util <= 1, `utilization ${util}`);
    assert.ok(total > 0 && used > 0 && used < total, `used ${used} of ${total}`);
    assert.ok(used >= process.memoryUsage().rss / 2, 'host memory in use covers (most of) this process');
  });

  it('--allow-cpu-metrics=false leaves the host gauges out', async () => {
    const m = await startMetrics([], false);
    const { types } = await scrape(m);
    for (const name of ['nv_cpu_utilization', 'nv_cpu_memory_total_bytes', 'nv_cpu_memory_used_bytes']) {
      assert.ok(!types.has(name), name);
    }
  });

  it('BAD REQUEST - answers 404 to any other path or method', async () => {
    const base = `http://127.0.0.1:${plain.port}`;
    for (const [path, method] of [
      ['/', 'GET'],
      ['/metricsx', 'GET'],
      ['/v2/health/ready', 'GET'],
      ['/metrics', 'POST'],
    ]) {
      assert.equal((await get(`${base}${path}`, method)).status, 404, `${method} ${path}`);
    }
    assert.equal((await get(`${base}/metrics?x=1`)).status, 200, 'a query string is ignored');
  });

  it('BAD CONFIG - an unknown --metrics-config key is rejected before anything listens', async () => {
    await assert.rejects(
      startMetricsServer(metricsSourceFrom(nereid.server), { port: 0, config: ['sumary_latencies=true'] }),
      (e: unknown) => e instanceof InvalidArgError && e.message.includes("'sumary_latencies'"),
    );
    await assert.rejects(
      startMetricsServer(metricsSourceFrom(nereid.server), { port: 0, intervalMs: 0 }),
      /--metrics-interval-ms must be a positive integer/,
    );
  });

  it('close() is idempotent and stops listening', async () => {
    const m = await startMetricsServer(metricsSourceFrom(nereid.server), { host: '127.0.0.1', port: 0 });
    // A kept-alive scrape connection stays open; close() must not wait for it to time out.
    await get(`http://127.0.0.1:${m.port}/metrics`);
    await Promise.all([m.close(), m.close()]);
    await m.close();
    await assert.rejects(get(`http://127.0.0.1:${m.port}/metrics`, 'GET', true), /ECONNREFUSED/);
  });
});
