import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startNereid, type TestServer } from '../helpers/server.js';
import { FIXTURES } from '../helpers/python-models.js';
import type * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';

/**
 * triton_python_backend_utils APIs that Triton's own example models reach (issue 27 items 1-3), each used by a model
 * of ours in test/fixtures/python and driven through the real server over HTTP and gRPC.
 */

interface InferBody {
  error?: string;
  outputs?: { name: string; data: unknown[]; datatype: string; shape: number[] }[];
}

export async function httpInfer(
  url: string,
  model: string,
  body: unknown,
): Promise<{ status: number; body: InferBody }> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as InferBody };
}

/** This suite's models (apart from test/fixtures/python, which other suites load whole). */
const API_MODELS = fileURLToPath(new URL('../fixtures/python-api/', import.meta.url));
/** Models whose auto_complete_config misuses the API (kept apart: they fail to load). */
const AUTOCOMPLETE_FAULTS = fileURLToPath(new URL('../fixtures/python-api-autocomplete/', import.meta.url));

/** A server in explicit mode with just these models of test/fixtures/python-api and test/fixtures/python. */
const serveModels = (...loadModels: string[]): Promise<TestServer> =>
  startNereid({ repositories: [API_MODELS, FIXTURES], modelControlMode: 'explicit', loadModels });

interface StreamReply {
  error_message: string;
}

const int32In = { inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] };

describe('python backend API parity (pb_utils)', () => {
  let s: TestServer;
  before(async () => {
    s = await serveModels('policy_probe', 'policy_probe_decoupled');
  });
  after(() => s?.close());

  it('using_decoupled_model_transaction_policy reads the model config (HTTP)', async () => {
    const { status, body } = await httpInfer(s.url, 'policy_probe', int32In);
    assert.equal(status, 200, body.error);
    assert.deepEqual(body.outputs?.[0].data, [false]);
    // The decoupled one answers through its response sender: HTTP's streaming endpoint.
    const res = await fetch(`${s.url}/v2/models/policy_probe_decoupled/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [1] }),
    });
    assert.equal(res.status, 200);
    const events = (await res.text()).split('\n\n').filter((e) => e.startsWith('data: '));
    assert.deepEqual(
      events.map((e) => (JSON.parse(e.slice(6)) as { DECOUPLED: unknown }).DECOUPLED),
      [true],
    );
  });

  it('using_decoupled_model_transaction_policy reads the model config (gRPC)', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const res = await callUnary<{ raw_output_contents: Buffer[] }>(client, 'ModelInfer', {
        model_name: 'policy_probe',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
      });
      assert.deepEqual([...res.raw_output_contents[0]], [0]);
    } finally {
      client.close();
    }
  });
});

describe('python custom metrics (pb_utils.MetricFamily) on /metrics', () => {
  let s: TestServer;
  before(async () => {
    s = await serveModels('custom_metrics');
  });
  after(() => s?.close());

  const scrape = async (): Promise<string> => (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
  const body = (mode: string, value: number) => ({
    inputs: [
      { name: 'MODE', datatype: 'BYTES', shape: [1], data: [mode] },
      { name: 'VALUE', datatype: 'FP64', shape: [1], data: [value] },
    ],
  });
  const misuse = async (mode: string): Promise<string> => {
    const { status, body: b } = await httpInfer(s.url, 'custom_metrics', body(mode, 0));
    assert.equal(status, 200, b.error);
    return String(b.outputs?.find((o) => o.name === 'MSG')?.data[0]);
  };

  it('exports counter, gauge and histogram with the names and labels the model gave (HTTP and gRPC)', async () => {
    for (const v of [2, 7]) {
      const { status, body: b } = await httpInfer(s.url, 'custom_metrics', body('', v));
      assert.equal(status, 200, b.error);
    }
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const res = await callUnary<{ raw_output_contents: Buffer[]; outputs: { name: string }[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'custom_metrics',
          inputs: [
            { name: 'MODE', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from('')] } },
            { name: 'VALUE', datatype: 'FP64', shape: [1], contents: { fp64_contents: [20] } },
          ],
        },
      );
      const count = res.raw_output_contents[res.outputs.findIndex((o) => o.name === 'COUNT')];
      assert.equal(count.readDoubleLE(0), 3, 'Metric.value() reads the counter back');
    } finally {
      client.close();
    }
    const text = await scrape();
    const labels = 'model="custom_metrics",version="1"';
    assert.match(text, /# TYPE nereid_test_requests_total counter/);
    assert.match(text, /# HELP nereid_test_requests_total requests seen by the model/);
    assert.ok(text.includes(`nereid_test_requests_total{${labels}} 3\n`), text);
    assert.ok(text.includes(`nereid_test_last_value{${labels}} 20\n`), text);
    assert.match(text, /# TYPE nereid_test_value_size histogram/);
    for (const line of [
      `nereid_test_value_size_bucket{${labels},le="1"} 0`,
      `nereid_test_value_size_bucket{${labels},le="5"} 1`,
      `nereid_test_value_size_bucket{${labels},le="10"} 2`,
      `nereid_test_value_size_bucket{${labels},le="+Inf"} 3`,
      `nereid_test_value_size_sum{${labels}} 29`,
      `nereid_test_value_size_count{${labels}} 3`,
    ]) {
      assert.ok(text.includes(`${line}\n`), `${line} in\n${text}`);
    }
  });

  it('a family created again with the same kind and labels shares the series', async () => {
    const before = (await httpInfer(s.url, 'custom_metrics', body('', 1))).body.outputs?.[0].data[0];
    assert.equal(await misuse('shared'), `shared ${Number(before).toFixed(1)}`);
  });

  it("BAD CALL - misuses raise in the model with Triton's errors", async () => {
    const cases: [string, RegExp][] = [
      [
        'kind_clash',
        /^TritonModelException: Error when creating MetricFamily: Family name already exists with different type$/,
      ],
      [
        'after_family_deleted',
        /^TritonModelException: Failed to set metric value: Invalid metric operation as the corresponding 'MetricFamily' has been deleted/,
      ],
      ['bad_label_name', /^TritonModelException: Error when creating Metric: Invalid label name '1bad'$/],
      [
        'label_value_not_str',
        /^TritonModelException: Error when creating Metric: Parameter \[n\] must have a type of TRITONSERVER_PARAMETER_STRING/,
      ],
      ['labels_not_dict', /^TritonModelException: Failed to create metric. Labels must be a dictionary.$/],
      [
        'counter_decrement',
        /^TritonModelException: Failed to increment metric value: TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.$/,
      ],
      [
        'counter_set',
        /^TritonModelException: Failed to set metric value: TRITONSERVER_METRIC_KIND_COUNTER does not support Set$/,
      ],
      [
        'gauge_observe',
        /^TritonModelException: Failed to observe metric value: TRITONSERVER_METRIC_KIND_GAUGE does not support Observe$/,
      ],
      [
        'histogram_value',
        /^TritonModelException: Failed to get metric value: TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value$/,
      ],
      ['histogram_no_buckets', /^TritonModelException: Failed to create metric. Missing required buckets.$/],
      [
        'histogram_unsorted',
        /^TritonModelException: Error when creating Metric: Bucket Boundaries must be strictly sorted$/,
      ],
      ['counter_buckets', /^TritonModelException: Failed to create metric. Unexpected buckets found.$/],
      ['bad_kind', /^TypeError: MetricFamily kind must be pb_utils.MetricFamily.COUNTER, GAUGE or HISTOGRAM, got 7$/],
    ];
    for (const [mode, want] of cases) assert.match(await misuse(mode), want, mode);
    // None of the refused calls left a family or series behind.
    const text = await scrape();
    assert.doesNotMatch(text, /nereid_test_doomed|nereid_test_bad_kind|1bad|le="2"/);
    assert.equal((text.match(/^nereid_test_requests_total\{/gm) ?? []).length, 1, text);
  });

  it("removes the model's metrics when it unloads", async () => {
    assert.match(await scrape(), /nereid_test_requests_total\{/);
    const res = await fetch(`${s.url}/v2/repository/models/custom_metrics/unload`, { method: 'POST', body: '{}' });
    assert.equal(res.status, 200);
    const text = await scrape();
    assert.doesNotMatch(text, /nereid_test_/);
  });
});

describe('python BLS (InferenceRequest.exec / async_exec)', () => {
  let s: TestServer;
  before(async () => {
    s = await serveModels('bls_probe', 'coded_error', 'square', 'echo_meta', 'slow_add_sub', 'stream_until_cancelled');
  });
  after(() => s?.close());

  const probe = async (mode: string, target: string): Promise<{ code: unknown; msg: unknown }> => {
    const { status, body } = await httpInfer(s.url, 'bls_probe', {
      inputs: [
        { name: 'MODE', datatype: 'BYTES', shape: [1], data: [mode] },
        { name: 'TARGET', datatype: 'BYTES', shape: [1], data: [target] },
      ],
    });
    assert.equal(status, 200, body.error);
    const get = (n: string) => body.outputs?.find((o) => o.name === n)?.data[0];
    return { code: get('CODE'), msg: get('MSG') };
  };

  // pb_utils.TritonError codes (TRITONSERVER_Error_Code order).
  const NOT_FOUND = 2;
  const INVALID_ARG = 3;
  const UNAVAILABLE = 4;
  const ALREADY_EXISTS = 6;
  const CANCELLED = 7;

  it("REGRESSION model_name and requested output names given as bytes; the called model's error arrives with its code", async () => {
    assert.deepEqual(await probe('coded', 'coded_error'), { code: UNAVAILABLE, msg: 'refused with code 4' });
    assert.deepEqual(await probe('coded_async', 'coded_error'), { code: ALREADY_EXISTS, msg: 'refused with code 6' });
  });

  it('BAD CALL - errors of the call itself arrive as TritonError with their code', async () => {
    const unknown = await probe('coded', 'no_such_model');
    assert.equal(unknown.code, NOT_FOUND, String(unknown.msg));
    const bad = await probe('bad_input', 'coded_error');
    assert.equal(bad.code, INVALID_ARG, String(bad.msg));
    assert.match(String(bad.msg), /WRONG/);
    assert.match(String((await probe('bad_name_type', '')).msg), /^TypeError: .*model_name/);
    assert.deepEqual(await probe('timeout', 'slow_add_sub'), { code: UNAVAILABLE, msg: 'Request timeout expired' });
  });

  it("the response iterator's cancel() cancels a decoupled call: the stream ends CANCELLED", async () => {
    const { code, msg } = await probe('cancel_stream', 'stream_until_cancelled');
    assert.equal(code, CANCELLED, String(msg));
    // Responses already on their way when the cancel landed are still read; not the 2000 the model would send.
    const got = Number(/^got (\d+)$/.exec(String(msg))?.[1]);
    assert.ok(got >= 2 && got < 1000, String(msg));
  });

  it('the called model sees the parameters the call gave, not the depth the server adds', async () => {
    const { code, msg } = await probe('params', 'echo_meta');
    assert.equal(code, -1, String(msg));
    assert.deepEqual((JSON.parse(String(msg)) as { params: unknown }).params, { k: 'v' });
  });

  it("await async_exec(decoupled=True) gives an iterator of the decoupled model's responses", async () => {
    assert.deepEqual(await probe('square_async', 'square'), { code: -1, msg: 'responses [3, 3, 3]' });
  });
});

describe('python BLS recursion without end', () => {
  let s: TestServer;
  before(async () => {
    s = await serveModels('bls_recurse');
  });
  after(() => s?.close());

  const DEPTH_ERROR = /BLS call to model 'bls_recurse' refused: BLS calls nested 33 deep, past the limit of 32/;

  it('FAULT - is ended by the BLS depth limit with a clear error (HTTP, then gRPC), and the model serves on', async () => {
    // HTTP: the first response is the error, so generate_stream answers it as the request's status.
    const res = await fetch(`${s.url}/v2/models/bls_recurse/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [1] }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, DEPTH_ERROR);
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const call = (
        client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamReply> }
      ).ModelStreamInfer();
      const replies: StreamReply[] = [];
      const done = new Promise<void>((resolve, reject) => {
        call.on('data', (r: StreamReply) => replies.push(r));
        call.on('error', reject);
        call.on('end', () => resolve());
      });
      call.write({
        model_name: 'bls_recurse',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
      });
      call.end();
      await done;
      assert.equal(replies.length, 1);
      assert.match(replies[0].error_message, DEPTH_ERROR);
    } finally {
      client.close();
    }
    const stats = (await (await fetch(`${s.url}/v2/models/bls_recurse/stats`)).json()) as {
      model_stats: { execution_count: number; inference_stats: { success: { count: number } } }[];
    };
    // Per round: the client's request and 32 nested calls ran; the 33rd call was refused before reaching the model.
    assert.equal(stats.model_stats[0].execution_count, 2 * 33, JSON.stringify(stats));
  });
});

describe('python custom metrics in auto_complete_config', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ repositories: [AUTOCOMPLETE_FAULTS], exitOnError: false });
  });
  after(() => s?.close());

  it('BAD MODEL - fail the load with the reason instead of waiting for an answer that never comes', async () => {
    const index = (await (await fetch(`${s.url}/v2/repository/index`, { method: 'POST', body: '{}' })).json()) as {
      name: string;
      state: string;
      reason: string;
    }[];
    const entry = index.find((m) => m.name === 'metrics_in_autocomplete');
    assert.equal(entry?.state, 'UNAVAILABLE');
    assert.match(
      entry?.reason ?? '',
      /Error when creating MetricFamily: custom metrics are not available in auto_complete_config/,
    );
  });
});
