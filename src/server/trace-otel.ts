import {
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type HrTime,
  type Span,
} from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { OtelExport, OtelOptions, OtelSpans, TracedRequest } from './trace-otel-types.js';

/**
 * The OpenTelemetry side of the tracer, loaded (with every @opentelemetry module) only when the server starts in
 * `--trace-config mode=opentelemetry`: trace.ts imports this file dynamically, so the file mode and a server with
 * tracing off never load the SDK. Spans are Triton's (src/tracer.cc, qa/L0_trace/opentelemetry_unittest.py):
 * `InferRequest` (the protocol's events) → a span named as the model (REQUEST_START, QUEUE_START, REQUEST_END) →
 * `compute` (the COMPUTE_* events); an ensemble step's model span is a child of the ensemble's model span.
 * Export goes through the SDK's batch span processor and OTLP/HTTP exporter; a collector that is down, slow or
 * refusing costs dropped spans (counted, one warning a minute), never a slower or failed request.
 */

const propagator = new W3CTraceContextPropagator();
const WARN_EVERY_MS = 60_000;

/** Monotonic ns (process.hrtime.bigint) → the wall clock the collector expects, offset fixed at start (as Triton). */
function clock(): (ns: bigint) => HrTime {
  const offset = BigInt(Date.now()) * 1_000_000n - process.hrtime.bigint();
  return (ns) => {
    const wall = ns + offset;
    return [Number(wall / 1_000_000_000n), Number(wall % 1_000_000_000n)];
  };
}

/**
 * Bounds the batch processor's queue itself (the processor would drop silently past its own bound) and counts
 * every span that never reaches the collector: over the queue bound, or in an export the collector failed.
 */
class Accounting {
  pending = 0;
  dropped = 0;
  #lastWarn = 0;
  constructor(
    readonly maxQueue: number,
    readonly warn: (msg: string) => void,
  ) {}

  drop(n: number, why: string): void {
    this.dropped += n;
    const now = Date.now();
    if (now - this.#lastWarn < WARN_EVERY_MS) return;
    this.#lastWarn = now;
    this.warn(`OpenTelemetry trace export: ${why}; ${this.dropped} span(s) dropped so far (said once a minute)`);
  }
}

function countingExporter(inner: SpanExporter, acc: Accounting): SpanExporter {
  return {
    export(spans: ReadableSpan[], done: (r: ExportResult) => void): void {
      acc.pending -= spans.length;
      inner.export(spans, (r) => {
        if (r.code !== ExportResultCode.SUCCESS)
          acc.drop(spans.length, `the collector did not take a batch (${r.error?.message ?? 'failed'})`);
        done(r);
      });
    },
    shutdown: () => inner.shutdown(),
    forceFlush: () => inner.forceFlush?.() ?? Promise.resolve(),
  };
}

function boundedProcessor(inner: SpanProcessor, acc: Accounting): SpanProcessor {
  return {
    onStart: (span, ctx) => inner.onStart(span, ctx),
    onEnd(span: ReadableSpan): void {
      if (acc.pending >= acc.maxQueue) return acc.drop(1, `the span queue is full (${acc.maxQueue})`);
      acc.pending++;
      inner.onEnd(span);
    },
    forceFlush: () => inner.forceFlush(),
    shutdown: () => inner.shutdown(),
  };
}

/** Triton's OTLP url is `host:port/path`; a scheme, when given, is kept. */
function exportUrl(url: string | undefined): string {
  if (url === undefined || url === '') return 'http://localhost:4318/v1/traces';
  return /^[a-z]+:\/\//i.test(url) ? url : `http://${url}`;
}

export function createOtelExport(opts: OtelOptions, warn: (msg: string) => void): OtelExport {
  const acc = new Accounting(opts.bspMaxQueueSize, warn);
  const exporter = countingExporter(
    new OTLPTraceExporter({ url: exportUrl(opts.url), timeoutMillis: opts.exportTimeoutMs }),
    acc,
  );
  const batch = new BatchSpanProcessor(exporter, {
    maxQueueSize: opts.bspMaxQueueSize + 1,
    maxExportBatchSize: opts.bspMaxExportBatchSize,
    scheduledDelayMillis: opts.bspScheduleDelayMs,
    exportTimeoutMillis: opts.exportTimeoutMs,
  });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'triton-inference-server', ...opts.resource }),
    sampler: new AlwaysOnSampler(),
    spanProcessors: [boundedProcessor(batch, acc)],
  });
  const tracer = provider.getTracer('triton-server');
  const at = clock();
  const start = (name: string, ns: bigint, parent: Context, attributes?: Attributes): Span =>
    tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: at(ns), attributes }, parent);
  return {
    spans: (t) => openSpans(t, start, at),
    dropped: () => acc.dropped,
    close: async () => {
      await provider.forceFlush().catch(() => undefined);
      await provider.shutdown().catch(() => undefined);
    },
  };
}

type StartSpan = (name: string, ns: bigint, parent: Context, attributes?: Attributes) => Span;

/** Opens a request's spans: InferRequest (not for an ensemble step) and the model's; `end` adds the rest. */
function openSpans(t: TracedRequest, start: StartSpan, at: (ns: bigint) => HrTime): OtelSpans {
  const client = t.trace?.traceparent ? propagator.extract(ROOT_CONTEXT, t.trace, defaultTextMapGetter) : ROOT_CONTEXT;
  const isStep = t.trace?.parentId !== undefined;
  let root: Span | undefined;
  if (!isStep) {
    root = start('InferRequest', t.trace?.recvStart ?? t.requestStart, client);
    const wire = t.trace?.protocol ?? 'HTTP';
    const [recvStart, recvEnd] =
      wire === 'GRPC' ? ['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END'] : ['HTTP_RECV_START', 'HTTP_RECV_END'];
    if (t.trace?.recvStart !== undefined) root.addEvent(recvStart, at(t.trace.recvStart));
    if (t.trace?.recvEnd !== undefined) root.addEvent(recvEnd, at(t.trace.recvEnd));
  }
  const parent = root ? trace.setSpan(ROOT_CONTEXT, root) : client;
  const model = start(t.model, t.requestStart, parent, {
    'triton.model_name': t.model,
    'triton.model_version': t.version,
    'triton.trace_id': t.id,
    'triton.trace_parent_id': t.trace?.parentId ?? 0,
  });
  model.addEvent('REQUEST_START', at(t.requestStart));
  return {
    id: t.id,
    /** The W3C context a composing model's request carries: its span is a child of this model's span. */
    childContext(): { traceparent?: string; tracestate?: string } {
      const carrier: { traceparent?: string; tracestate?: string } = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, model), carrier, defaultTextMapSetter);
      return carrier;
    },
    end(m) {
      model.addEvent('QUEUE_START', at(m.queueStart));
      if (m.compute !== undefined) {
        const c = m.compute;
        const compute = start('compute', c.start, trace.setSpan(ROOT_CONTEXT, model));
        compute.addEvent('COMPUTE_START', at(c.start));
        compute.addEvent('COMPUTE_INPUT_END', at(c.inputEnd));
        compute.addEvent('COMPUTE_OUTPUT_START', at(c.outputStart));
        compute.addEvent('COMPUTE_END', at(c.end));
        compute.end(at(c.end));
      }
      model.addEvent('REQUEST_END', at(m.requestEnd));
      if (m.error !== undefined) model.setStatus({ code: SpanStatusCode.ERROR, message: m.error });
      model.end(at(m.requestEnd));
      if (root === undefined) return undefined;
      root.addEvent('INFER_RESPONSE_COMPLETE', at(m.requestEnd));
      if (m.deferRoot !== true || m.error !== undefined) {
        root.end(at(m.requestEnd));
        return undefined;
      }
      const r = root;
      const wire = t.trace?.protocol ?? 'HTTP';
      return (sendStart, sendEnd) => {
        r.addEvent(`${wire}_SEND_START`, at(sendStart));
        r.addEvent(`${wire}_SEND_END`, at(sendEnd));
        r.end(at(sendEnd));
      };
    },
  };
}
