import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { parseTraceConfig } from '../../src/cli/flag-settings.js';
import { parseFlags } from '../../src/cli/flags.js';
import { addSubModel, ELEM, writeModel } from '../fixtures/onnx-builder.js';
import { callUnary, inferenceClient, int32Bytes } from '../helpers/grpc.js';
import { Collector, otelcolBinary, type OtlpSpan } from '../helpers/otelcol.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { EXAMPLES, startNereid, TEST_FRONTEND_THREADS, type TestServer } from '../helpers/server.js';

/**
 * `--trace-config mode=opentelemetry` against a real OpenTelemetry Collector (scripts/setup-otelcol.sh): the spans
 * Triton emits (qa/L0_trace/opentelemetry_unittest.py: InferRequest → model → compute, an ensemble's step under the
 * ensemble's model span), the client's W3C trace context from HTTP headers and gRPC metadata, runtime rate and
 * level changes, and a collector that stops costing dropped spans (counted), never failed requests.
 */

const bin = otelcolBinary();
const skip = 'skip' in bin ? bin.skip : false;

const i32 = (name: string) => `{ name: "${name}" data_type: TYPE_INT32 dims: [ 16 ] }`;
const MODELS: Record<string, string> = {
  add_sub: `backend: "onnxruntime" max_batch_size: 8
    input [ ${i32('INPUT0')}, ${i32('INPUT1')} ] output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ]`,
  ens: `platform: "ensemble" max_batch_size: 8
    input [ ${i32('A')}, ${i32('B')} ] output [ ${i32('S')}, ${i32('D')} ]
    ensemble_scheduling { step [ { model_name: "add_sub" model_version: -1
      input_map { key: "INPUT0" value: "A" } input_map { key: "INPUT1" value: "B" }
      output_map { key: "OUTPUT0" value: "S" } output_map { key: "OUTPUT1" value: "D" } } ] }`,
  bls_traced: `backend: "python" max_batch_size: 8
    input [ ${i32('INPUT0')}, ${i32('INPUT1')} ] output [ ${i32('OUTPUT0')}, ${i32('OUTPUT1')} ]`,
};

/** A python model that calls add_sub through BLS, passing its request's trace on (Triton's `trace=request.trace()`). */
const BLS_TRACED = `import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            inputs = [pb_utils.get_input_tensor_by_name(request, n) for n in ("INPUT0", "INPUT1")]
            call = pb_utils.InferenceRequest(
                model_name="add_sub", requested_output_names=["OUTPUT0", "OUTPUT1"], inputs=inputs, trace=request.trace()
            )
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            out.append(pb_utils.InferenceResponse(answer.output_tensors()))
        return out
`;

const DATA = Array.from({ length: 16 }, (_, i) => i);
const newTraceparent = (): { header: string; traceId: string; spanId: string } => {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { header: `00-${traceId}-${spanId}-01`, traceId, spanId };
};

async function inferHttp(url: string, model: string, names: [string, string], traceparent?: string): Promise<number> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: traceparent === undefined ? {} : { traceparent },
    body: JSON.stringify({
      inputs: names.map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: DATA })),
    }),
  });
  await res.arrayBuffer();
  return res.status;
}

async function inferGrpc(client: grpc.Client, traceparent?: string): Promise<void> {
  const md = new grpc.Metadata();
  if (traceparent !== undefined) md.set('traceparent', traceparent);
  const contents = int32Bytes(DATA);
  await callUnary(
    client,
    'ModelInfer',
    {
      model_name: 'simple',
      inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16] })),
      raw_input_contents: [contents, contents],
    },
    {},
    md,
  );
}

const byName = (spans: OtlpSpan[], name: string): OtlpSpan => {
  const s = spans.find((x) => x.name === name);
  assert.ok(s, `a span named ${name} among ${spans.map((x) => x.name).join(', ')}`);
  return s;
};
const inTrace = (traceId: string) => (all: OtlpSpan[]) => all.filter((s) => s.traceId === traceId);
const SERVER_KIND = 2;

/** Triton's tree for one request of a plain model, continuing the client's span. */
function assertSimpleTrace(spans: OtlpSpan[], clientSpan: string, model: string, wire: 'HTTP' | 'GRPC'): void {
  assert.deepEqual(spans.map((s) => s.name).sort(), ['InferRequest', 'compute', model].sort());
  const root = byName(spans, 'InferRequest');
  const req = byName(spans, model);
  const compute = byName(spans, 'compute');
  assert.equal(root.parentSpanId, clientSpan, 'the root span continues the client span');
  assert.equal(req.parentSpanId, root.spanId);
  assert.equal(compute.parentSpanId, req.spanId);
  for (const s of spans) assert.equal(s.kind, SERVER_KIND);
  const recv = wire === 'HTTP' ? ['HTTP_RECV_START', 'HTTP_RECV_END'] : ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END'];
  // The send events come from the protocol that wrote the answer; a front-end thread's write is not reported back.
  const send = TEST_FRONTEND_THREADS === 1 ? [`${wire}_SEND_START`, `${wire}_SEND_END`] : [];
  assert.deepEqual(root.events, [...recv, 'INFER_RESPONSE_COMPLETE', ...send]);
  assert.deepEqual(req.events, ['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
  assert.deepEqual(compute.events, ['COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END']);
  assert.equal(req.attributes['triton.model_name'], model);
  assert.equal(req.attributes['triton.model_version'], 1);
  assert.ok((req.attributes['triton.trace_id'] as number) > 0);
  assert.equal(req.attributes['triton.trace_parent_id'], 0);
  assert.equal(root.resource['service.name'], 'nereid_test');
  assert.equal(root.resource['test.key'], 'test.value');
}

async function droppedSpans(s: TestServer): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
  const m = /^nereid_trace_spans_dropped (\d+)/m.exec(text);
  assert.ok(m, 'the metrics endpoint exports nereid_trace_spans_dropped');
  return Number(m[1]);
}

describe('OpenTelemetry tracing, against a real collector', { skip }, () => {
  let collector: Collector;
  let s: TestServer;
  let repo: string;
  let client: grpc.Client;
  const logger = recordingLogger();

  before(async () => {
    collector = await Collector.start((bin as { path: string }).path);
    repo = await mkdtemp(join(tmpdir(), 'nereid-otel-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
      if (config.includes('onnxruntime'))
        await writeModel(join(repo, name, '1', 'model.onnx'), addSubModel(ELEM.INT32));
      if (config.includes('python')) await writeFile(join(repo, name, '1', 'model.py'), BLS_TRACED);
    }
    s = await startNereid({
      repositories: [EXAMPLES, repo],
      logger,
      trace: {
        mode: 'opentelemetry',
        level: 'TIMESTAMPS',
        rate: 1,
        otel: {
          url: collector.url,
          resource: { 'service.name': 'nereid_test', 'test.key': 'test.value' },
          bspScheduleDelayMs: 50,
          exportTimeoutMs: 2000,
        },
      },
    });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await collector?.close();
    if (repo) await rm(repo, { recursive: true, force: true });
  });

  it('HTTP: InferRequest → model → compute, with the client traceparent continued', async () => {
    const tp = newTraceparent();
    assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1'], tp.header), 200);
    const spans = inTrace(tp.traceId)(await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 3, 'spans'));
    assertSimpleTrace(spans, tp.spanId, 'simple', 'HTTP');
  });

  it('gRPC: the traceparent comes from the call metadata', async () => {
    const tp = newTraceparent();
    await inferGrpc(client, tp.header);
    const spans = inTrace(tp.traceId)(await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 3, 'spans'));
    assertSimpleTrace(spans, tp.spanId, 'simple', 'GRPC');
  });

  it('without a traceparent the request starts a trace of its own', async () => {
    const roots = (a: OtlpSpan[]) => a.filter((x) => x.name === 'InferRequest' && x.parentSpanId === '');
    const before = roots(await collector.spans()).length;
    assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1']), 200);
    const all = await collector.waitFor((a) => roots(a).length > before, 'a root span');
    const root = roots(all).at(-1) as OtlpSpan;
    const spans = inTrace(root.traceId)(await collector.waitFor((a) => inTrace(root.traceId)(a).length >= 3, 'spans'));
    assertSimpleTrace(spans, '', 'simple', 'HTTP');
  });

  it('an ensemble step is a child of the ensemble model span, with its trace id as parent id', async () => {
    const tp = newTraceparent();
    assert.equal(await inferHttp(s.url, 'ens', ['A', 'B'], tp.header), 200);
    const spans = inTrace(tp.traceId)(await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 4, 'spans'));
    assert.deepEqual(spans.map((x) => x.name).sort(), ['InferRequest', 'add_sub', 'compute', 'ens']);
    const root = byName(spans, 'InferRequest');
    const ens = byName(spans, 'ens');
    const step = byName(spans, 'add_sub');
    assert.equal(root.parentSpanId, tp.spanId);
    assert.equal(ens.parentSpanId, root.spanId);
    assert.equal(step.parentSpanId, ens.spanId, "the step's span is a child of the ensemble's");
    assert.equal(byName(spans, 'compute').parentSpanId, step.spanId);
    assert.equal(step.attributes['triton.trace_parent_id'], ens.attributes['triton.trace_id']);
    assert.deepEqual(ens.events, ['REQUEST_START', 'QUEUE_START', 'REQUEST_END']);
  });

  it("a BLS call made with the request's trace is a child of the calling model's span", async () => {
    const tp = newTraceparent();
    assert.equal(await inferHttp(s.url, 'bls_traced', ['INPUT0', 'INPUT1'], tp.header), 200);
    const spans = inTrace(tp.traceId)(await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 5, 'spans'));
    assert.deepEqual(spans.map((x) => x.name).sort(), ['InferRequest', 'add_sub', 'bls_traced', 'compute', 'compute']);
    const caller = byName(spans, 'bls_traced');
    const called = byName(spans, 'add_sub');
    assert.equal(caller.parentSpanId, byName(spans, 'InferRequest').spanId);
    assert.equal(called.parentSpanId, caller.spanId, "the BLS call's span is a child of the calling model's");
    assert.equal(called.attributes['triton.trace_parent_id'], caller.attributes['triton.trace_id']);
  });

  it('rate and level changed at run time through /v2/trace/setting take effect', async () => {
    const post = async (body: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${s.url}/v2/trace/setting`, { method: 'POST', body: JSON.stringify(body) });
      assert.equal(res.status, 200);
      return (await res.json()) as Record<string, unknown>;
    };
    const settings = await post({ trace_rate: '3' });
    assert.equal(settings.trace_mode, 'opentelemetry');
    assert.equal(settings.trace_rate, '3');
    const sent = Array.from({ length: 6 }, newTraceparent);
    for (const tp of sent) assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1'], tp.header), 200);
    await post({ trace_level: ['OFF'] });
    const off = newTraceparent();
    assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1'], off.header), 200);
    await post({ trace_level: ['TIMESTAMPS'], trace_rate: '1' });
    // Spans go out in the order they end: once the marker's trace is in, every earlier one is.
    const marker = newTraceparent();
    assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1'], marker.header), 200);
    const all = await collector.waitFor((a) => inTrace(marker.traceId)(a).length >= 3, 'the marker trace');
    const traced = sent.filter((tp) => inTrace(tp.traceId)(all).length > 0);
    assert.equal(traced.length, 2, 'one request in 3 traced at rate 3');
    assert.equal(inTrace(off.traceId)(all).length, 0, 'nothing traced at level OFF');
  });

  it("Triton's command line: mode, url, resources and the batch processor's settings", async () => {
    const args = [
      '--trace-config=mode=opentelemetry',
      `--trace-config=opentelemetry,url=${collector.url}`,
      '--trace-config=opentelemetry,resource=service.name=nereid_cli',
      '--trace-config=opentelemetry,resource=deployment=test=1',
      '--trace-config=opentelemetry,bsp_schedule_delay=50',
      '--trace-config=opentelemetry,bsp_max_queue_size=64',
      '--trace-config=opentelemetry,bsp_max_export_batch_size=16',
      '--trace-config=rate=1',
      '--trace-config=level=TIMESTAMPS',
      `--model-repository=${EXAMPLES}`,
    ];
    assert.deepEqual(parseTraceConfig(parseFlags(args).values), {
      mode: 'opentelemetry',
      rate: 1,
      level: 'TIMESTAMPS',
      otel: {
        url: collector.url,
        resource: { 'service.name': 'nereid_cli', deployment: 'test=1' },
        bspScheduleDelayMs: 50,
        bspMaxQueueSize: 64,
        bspMaxExportBatchSize: 16,
      },
    });
    const tp = newTraceparent();
    await withNereidCli(args, async (url) => {
      assert.equal(await inferHttp(url, 'simple', ['INPUT0', 'INPUT1'], tp.header), 200);
      const spans = inTrace(tp.traceId)(await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 3, 'spans'));
      assert.equal(byName(spans, 'InferRequest').resource['service.name'], 'nereid_cli');
      assert.equal(byName(spans, 'InferRequest').resource.deployment, 'test=1');
    });
  });

  it('BAD CALL - unknown OpenTelemetry keys and modes are refused at start', () => {
    const parse = (...a: string[]) => parseTraceConfig(parseFlags(a.map((x) => `--trace-config=${x}`)).values);
    assert.throws(() => parse('opentelemetry,colour=blue'), /unknown key 'colour'/);
    assert.throws(() => parse('mode=zipkin'), /mode 'zipkin' is not supported/);
    assert.throws(() => parse('opentelemetry,bsp_max_queue_size=0'), /bsp_max_queue_size must be an integer >= 1/);
    assert.throws(() => parse('opentelemetry,resource=novalue'), /resource must be <key>=<value>/);
  });

  it('a stopped collector costs dropped spans (counted), never a failed request', async () => {
    const droppedBefore = await droppedSpans(s);
    await collector.stop();
    try {
      for (let i = 0; i < 10; i++) {
        assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1']), 200);
        await inferGrpc(client);
      }
      for (let i = 0; i < 300 && (await droppedSpans(s)) <= droppedBefore; i++) await sleep(100);
      assert.ok((await droppedSpans(s)) > droppedBefore, 'the drop counter rose');
      const warned = logger.entries.filter((e) => e.level === 'warn' && /OpenTelemetry trace export/.test(e.msg));
      assert.equal(warned.length, 1, 'one warning (rate-limited), not one per batch');
    } finally {
      await collector.restart();
    }
    const tp = newTraceparent();
    assert.equal(await inferHttp(s.url, 'simple', ['INPUT0', 'INPUT1'], tp.header), 200);
    await collector.waitFor((a) => inTrace(tp.traceId)(a).length >= 3, 'spans after the collector came back');
  });
});

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** `nereid serve <args>` until `use(httpUrl)` is done, then SIGTERM. */
async function withNereidCli(args: string[], use: (url: string) => Promise<void>): Promise<void> {
  const child = spawn(
    process.execPath,
    ['--conditions=nereid-source', '--import', 'tsx', MAIN, 'serve', ...args, '--log-format=json'].concat([
      `--http-thread-count=${TEST_FRONTEND_THREADS}`,
      '--http-port=0',
      '--http-address=127.0.0.1',
      '--allow-grpc=false',
      '--allow-metrics=false',
    ]),
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let logs = '';
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const seen = (d: Buffer): void => {
        logs += d.toString();
        const port = /Started HTTPService at [^:]+:(\d+)/.exec(logs)?.[1];
        if (port !== undefined && /"msg":"nereid \S+ ready"/.test(logs)) resolve(`http://127.0.0.1:${port}`);
      };
      child.stdout.on('data', seen);
      child.stderr.on('data', seen);
      child.once('exit', (code) => reject(new Error(`nereid exited (${code}): ${logs}`)));
    });
    await use(url);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('OpenTelemetry SDK loading', () => {
  const probe = fileURLToPath(new URL('../fixtures/otel-probe.ts', import.meta.url));
  const run = async (mode: string): Promise<string[]> => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--conditions=nereid-source', '--import', 'tsx', probe, mode],
      { timeout: 120_000 },
    );
    return JSON.parse(stdout.trim().split('\n').at(-1) as string) as string[];
  };

  it('no @opentelemetry module is loaded by Nereid unless tracing is in opentelemetry mode', async () => {
    // prom-client (the metrics) has always required @opentelemetry/api itself, for exemplars; nothing else may.
    const promClient = '@opentelemetry/api <- prom-client/lib/metrics/processCpuTotal.js';
    assert.deepEqual(await run('triton'), [promClient], 'the file mode served a traced request with no SDK');
    const otel = await run('opentelemetry');
    assert.ok(
      otel.includes('@opentelemetry/sdk-trace-base <- src/server/trace-otel.ts'),
      `the probe sees the SDK: ${otel}`,
    );
  });
});
