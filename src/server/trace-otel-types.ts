import type { RequestTrace } from '../core/inference.js';

/** `--trace-config opentelemetry,<key>=<value>` settings (Triton's names and defaults). */
export interface OtelOptions {
  /** `url`: the collector's OTLP/HTTP traces endpoint, `host:port/v1/traces` (default localhost:4318). */
  url?: string;
  /** `resource=<key>=<value>`, repeatable: resource attributes of every span. */
  resource: Record<string, string>;
  /** `bsp_max_queue_size` (2048): spans waiting for export; more are dropped and counted. */
  bspMaxQueueSize: number;
  /** `bsp_schedule_delay` (5000 ms): the longest a span waits before its batch goes out. */
  bspScheduleDelayMs: number;
  /** `bsp_max_export_batch_size` (512). */
  bspMaxExportBatchSize: number;
  /** How long one export may take before it counts as failed (Nereid's; 10 s). */
  exportTimeoutMs: number;
}

export const OTEL_DEFAULTS: Readonly<Omit<OtelOptions, 'resource' | 'url'>> = Object.freeze({
  bspMaxQueueSize: 2048,
  bspScheduleDelayMs: 5000,
  bspMaxExportBatchSize: 512,
  exportTimeoutMs: 10_000,
});

/** One traced request as the pipeline sees it when it starts (hrtime ns). */
export interface TracedRequest {
  id: number;
  model: string;
  version: number;
  requestStart: bigint;
  trace: RequestTrace | undefined;
}

/** What the pipeline measured when the request ended. */
export interface TracedEnd {
  queueStart: bigint;
  /** Absent for ensembles (their steps have the compute spans) and failed requests. */
  compute?: { start: bigint; inputEnd: bigint; outputStart: bigint; end: bigint };
  requestEnd: bigint;
  /** The error's message when the request failed. */
  error?: string;
  /**
   * The protocol will say when it wrote the response (`InferResponse.onSent`): the InferRequest span then gets
   * Triton's `*_SEND_START`/`*_SEND_END` events and ends at the write's end, not at REQUEST_END.
   */
  deferRoot?: boolean;
}

/** Ends a deferred InferRequest span with the response's write, process.hrtime.bigint ns. */
export type SentHook = (sendStart: bigint, sendEnd: bigint) => void;

/** The spans of one traced request, open until `end`. */
export interface OtelSpans {
  /** The request's trace id (Triton's `triton.trace_id`), its steps' `triton.trace_parent_id`. */
  readonly id: number;
  childContext(): { traceparent?: string; tracestate?: string };
  /** Ends the spans; with `deferRoot` (and a root span) returns the hook that ends the root. */
  end(m: TracedEnd): SentHook | undefined;
}

export interface OtelExport {
  spans(t: TracedRequest): OtelSpans;
  /** Spans that never reached the collector (queue full, export failed). */
  dropped(): number;
  close(): Promise<void>;
}
