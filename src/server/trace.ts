import { createWriteStream, type WriteStream } from 'node:fs';
import { InvalidArgError, UnsupportedError } from '../core/errors.js';
import type { RequestTrace } from '../core/inference.js';
import type { ComputeTimings } from '../core/stats.js';
import type { TraceSettings } from './api.js';
import { OTEL_DEFAULTS, type OtelExport, type OtelOptions, type OtelSpans } from './trace-otel-types.js';

/**
 * Triton's trace extension, TIMESTAMPS level: samples one request in `trace_rate`, at most `trace_count` of them
 * (-1 = no limit), and writes Triton's trace records (a JSON array of `{id, model_name, model_version,
 * request_id}` and `{id, timestamps: [{name, ns}]}` objects, monotonic ns) to the file named on the command
 * line. Settings are global with per-model overrides; `null` resets a model's key to the global value.
 * Records are written as each traced request completes; `log_frequency` is accepted and reported only.
 *
 * With `mode=opentelemetry` the same settings (rate, count, level, runtime updates) pick the requests, and their
 * spans go to an OTLP collector instead (trace-otel.ts, whose SDK is imported only in that mode, by `start`).
 */

interface Settings {
  level: 'OFF' | 'TIMESTAMPS';
  rate: number;
  count: number;
  logFrequency: number;
}

export interface TraceOptions {
  mode?: 'triton' | 'opentelemetry';
  /** `--trace-config opentelemetry,<key>=<value>` settings; defaults are Triton's. */
  otel?: Partial<OtelOptions>;
  file?: string;
  level?: string;
  rate?: number;
  count?: number;
  logFrequency?: number;
}

/** Timestamps of one request, in process.hrtime.bigint() ns. */
export interface TraceTimestamps {
  REQUEST_START: bigint;
  QUEUE_START: bigint;
  COMPUTE_START: bigint;
  COMPUTE_INPUT_END: bigint;
  COMPUTE_OUTPUT_START: bigint;
  COMPUTE_END: bigint;
  REQUEST_END: bigint;
}

const DEFAULTS: Readonly<Settings> = Object.freeze({ level: 'OFF', rate: 1000, count: -1, logFrequency: 0 });

const KEYS = ['trace_level', 'trace_rate', 'trace_count', 'log_frequency', 'trace_file', 'trace_mode'] as const;

export class Tracer {
  readonly #mode: 'triton' | 'opentelemetry';
  readonly #otelOptions: OtelOptions;
  #otel: OtelExport | undefined;
  readonly #file: string;
  readonly #global: Settings;
  readonly #models = new Map<string, Partial<Settings>>();
  readonly #seen = new Map<string, number>();
  readonly #traced = new Map<string, number>();
  #nextId = 1;
  #out: WriteStream | undefined;
  #records = 0;

  constructor(opts: TraceOptions = {}) {
    this.#mode = opts.mode ?? 'triton';
    this.#otelOptions = { ...OTEL_DEFAULTS, resource: {}, ...opts.otel };
    this.#file = opts.file ?? '';
    this.#global = {
      level: parseLevel(opts.level === undefined ? ['OFF'] : [opts.level]),
      rate: opts.rate ?? 1000,
      count: opts.count ?? -1,
      logFrequency: opts.logFrequency ?? 0,
    };
    if (this.#global.level !== 'OFF' && !this.#file && this.#mode === 'triton') {
      throw new InvalidArgError('trace level TIMESTAMPS needs a trace file: --trace-config triton,file=<path>');
    }
  }

  /** In OpenTelemetry mode, loads the SDK and its exporter (nothing of it is loaded otherwise). */
  async start(warn: (msg: string) => void): Promise<void> {
    if (this.#mode !== 'opentelemetry' || this.#otel !== undefined) return;
    const { createOtelExport } = await import('./trace-otel.js');
    this.#otel = createOtelExport(this.#otelOptions, warn);
  }

  /** OpenTelemetry spans dropped (queue full, collector down or refusing); 0 in the file mode. */
  droppedSpans(): number {
    return this.#otel?.dropped() ?? 0;
  }

  /**
   * OpenTelemetry mode: samples the request now (as Triton, at its start) and opens its spans; undefined when not
   * traced, and always in the file mode (recordRequest samples there). A step of a traced ensemble is traced.
   */
  begin(model: string, version: number, requestStart: bigint, trace: RequestTrace | undefined): OtelSpans | undefined {
    const otel = this.#otel;
    if (otel === undefined) return undefined;
    const id = trace?.parentId !== undefined ? this.#nextId++ : this.sample(model);
    if (id === 0) return undefined;
    return otel.spans({ id, model, version, requestStart, trace });
  }

  #effective(model?: string): Settings {
    return { ...this.#global, ...(model ? this.#models.get(model) : undefined) };
  }

  settings(model?: string): TraceSettings {
    const s = this.#effective(model);
    return {
      trace_level: [s.level],
      trace_rate: String(s.rate),
      trace_count: String(s.count),
      log_frequency: String(s.logFrequency),
      trace_file: this.#file,
      trace_mode: this.#mode,
    };
  }

  /** Validates the whole update first (nothing changes on error), then applies it. */
  update(model: string | undefined, update: Record<string, unknown>): TraceSettings {
    const next: Partial<Settings> = { ...(model ? this.#models.get(model) : this.#global) };
    for (const [key, value] of Object.entries(update)) {
      if (!(KEYS as readonly string[]).includes(key)) {
        throw new InvalidArgError(`unknown trace setting '${key}'; known: ${KEYS.join(', ')}`);
      }
      if (key === 'trace_file') {
        throw new UnsupportedError('trace file location can not be updated through network protocol');
      }
      if (key === 'trace_mode') {
        if (value !== null && value !== this.#mode)
          throw new UnsupportedError(`trace mode '${String(value)}' is not supported`);
        continue;
      }
      const field = (
        { trace_level: 'level', trace_rate: 'rate', trace_count: 'count', log_frequency: 'logFrequency' } as const
      )[key as 'trace_level' | 'trace_rate' | 'trace_count' | 'log_frequency'];
      if (value === null) {
        if (model) delete next[field];
        else Object.assign(next, { [field]: DEFAULTS[field] });
        continue;
      }
      if (field === 'level') next.level = parseLevel(Array.isArray(value) ? value : [value]);
      else next[field] = parseCount(key, value, field === 'count' ? -1 : field === 'rate' ? 1 : 0);
    }
    if ((next.level ?? this.#global.level) !== 'OFF' && !this.#file && this.#mode === 'triton') {
      throw new InvalidArgError(
        'trace_level TIMESTAMPS needs a trace file; start nereid with --trace-config triton,file=<path>',
      );
    }
    if (model) this.#models.set(model, next);
    else Object.assign(this.#global, next);
    return this.settings(model);
  }

  /** The file mode's sampling, when the request is done: its trace id, or 0 (always 0 in OpenTelemetry mode). */
  sampleFile(model: string): number {
    return this.#mode === 'triton' ? this.sample(model) : 0;
  }

  /** Decides whether to trace this request; returns its trace id, or 0. */
  sample(model: string): number {
    const s = this.#effective(model);
    if (s.level === 'OFF') return 0;
    const seen = (this.#seen.get(model) ?? 0) + 1;
    this.#seen.set(model, seen);
    if ((seen - 1) % s.rate !== 0) return 0;
    const traced = this.#traced.get(model) ?? 0;
    if (s.count >= 0 && traced >= s.count) return 0;
    this.#traced.set(model, traced + 1);
    return this.#nextId++;
  }

  /**
   * Records a traced request from what the server measured: its start, when it entered the queue, its queue time
   * and its batch's compute durations. The compute timestamps are derived from the durations (the worker's clock is
   * not ours) and capped at the request's end, since a batch's timings can overlap this request's own clock.
   */
  recordRequest(
    id: number,
    model: string,
    version: number,
    requestId: string | undefined,
    m: { requestStart: bigint; queueStart: bigint; queueNs: number; timings: ComputeTimings; computeStart?: bigint },
  ): void {
    const end = process.hrtime.bigint();
    const c = computeTimes(end, m.queueStart, m.queueNs, m.timings, m.computeStart);
    this.record(id, model, version, requestId, {
      REQUEST_START: m.requestStart,
      QUEUE_START: m.queueStart,
      COMPUTE_START: c.start,
      COMPUTE_INPUT_END: c.inputEnd,
      COMPUTE_OUTPUT_START: c.outputStart,
      COMPUTE_END: c.end,
      REQUEST_END: end,
    });
  }

  record(id: number, model: string, version: number, requestId: string | undefined, t: TraceTimestamps): void {
    if (id === 0) return;
    const head: Record<string, unknown> = { id, model_name: model, model_version: version };
    if (requestId !== undefined) head.request_id = requestId;
    const timestamps = Object.entries(t).map(([name, ns]) => `{"name":"${name}","ns":${ns}}`);
    this.#write(JSON.stringify(head));
    this.#write(`{"id":${id},"timestamps":[${timestamps.join(',')}]}`);
  }

  #write(record: string): void {
    this.#out ??= createWriteStream(this.#file, { flags: 'w' });
    this.#out.write(`${this.#records++ === 0 ? '[\n' : ',\n'}${record}`);
  }

  /** Closes the JSON array and the file; sends the spans still queued (a collector that is down gets 2 s). */
  async close(): Promise<void> {
    const otel = this.#otel;
    this.#otel = undefined;
    if (otel !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, 2000).unref()));
      await Promise.race([otel.close(), late]);
      clearTimeout(timer);
    }
    const out = this.#out;
    if (!out) return Promise.resolve();
    this.#out = undefined;
    return new Promise<void>((resolve) => out.end('\n]\n', () => resolve()));
  }
}

/**
 * A request's compute timestamps: from its batch's start (else one derived from its queue time) by the batch's
 * compute durations (the worker's clock is not ours), capped at the request's end since a batch's timings can
 * overlap this request's own clock.
 */
export function computeTimes(
  end: bigint,
  queueStart: bigint,
  queueNs: number,
  timings: ComputeTimings,
  computeStart?: bigint,
): { start: bigint; inputEnd: bigint; outputStart: bigint; end: bigint } {
  const at = (ns: bigint): bigint => (ns < end ? ns : end);
  const start = at(computeStart ?? queueStart + BigInt(queueNs));
  const inputEnd = at(start + BigInt(timings.computeInputNs));
  const outputStart = at(inputEnd + BigInt(timings.computeInferNs));
  return { start, inputEnd, outputStart, end: at(outputStart + BigInt(timings.computeOutputNs)) };
}

function parseLevel(values: unknown[]): 'OFF' | 'TIMESTAMPS' {
  const levels = values.map((v) => String(v).toUpperCase());
  for (const l of levels) {
    if (l === 'TENSORS')
      throw new UnsupportedError('trace level TENSORS is not implemented yet in Nereid; use TIMESTAMPS');
    if (l !== 'OFF' && l !== 'TIMESTAMPS')
      throw new InvalidArgError(`unknown trace level '${l}'; use OFF or TIMESTAMPS`);
  }
  return levels.includes('TIMESTAMPS') ? 'TIMESTAMPS' : 'OFF';
}

function parseCount(key: string, value: unknown, min: number): number {
  const n =
    typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : typeof value === 'number' ? value : NaN;
  if (!Number.isSafeInteger(n) || n < min) {
    throw new InvalidArgError(
      `trace setting '${key}' must be an integer >= ${min} (as a string), got ${JSON.stringify(value)}`,
    );
  }
  return n;
}
