import { createWriteStream, type WriteStream } from 'node:fs';
import { InvalidArgError, UnsupportedError } from '../core/errors.js';
import type { ComputeTimings } from '../core/stats.js';
import type { TraceSettings } from './api.js';

/**
 * Triton's trace extension, TIMESTAMPS level: samples one request in `trace_rate`, at most `trace_count` of them
 * (-1 = no limit), and writes Triton's trace records (a JSON array of `{id, model_name, model_version,
 * request_id}` and `{id, timestamps: [{name, ns}]}` objects, monotonic ns) to the file named on the command
 * line. Settings are global with per-model overrides; `null` resets a model's key to the global value.
 * Records are written as each traced request completes; `log_frequency` is accepted and reported only.
 */

interface Settings {
  level: 'OFF' | 'TIMESTAMPS';
  rate: number;
  count: number;
  logFrequency: number;
}

export interface TraceOptions {
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
  readonly #file: string;
  readonly #global: Settings;
  readonly #models = new Map<string, Partial<Settings>>();
  readonly #seen = new Map<string, number>();
  readonly #traced = new Map<string, number>();
  #nextId = 1;
  #out: WriteStream | undefined;
  #records = 0;

  constructor(opts: TraceOptions = {}) {
    this.#file = opts.file ?? '';
    this.#global = {
      level: parseLevel(opts.level === undefined ? ['OFF'] : [opts.level]),
      rate: opts.rate ?? 1000,
      count: opts.count ?? -1,
      logFrequency: opts.logFrequency ?? 0,
    };
    if (this.#global.level !== 'OFF' && !this.#file) {
      throw new InvalidArgError('trace level TIMESTAMPS needs a trace file: --trace-config triton,file=<path>');
    }
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
      trace_mode: 'triton',
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
        if (value !== null && value !== 'triton')
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
    if ((next.level ?? this.#global.level) !== 'OFF' && !this.#file) {
      throw new InvalidArgError(
        'trace_level TIMESTAMPS needs a trace file; start nereid with --trace-config triton,file=<path>',
      );
    }
    if (model) this.#models.set(model, next);
    else Object.assign(this.#global, next);
    return this.settings(model);
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
    m: { requestStart: bigint; queueStart: bigint; queueNs: number; timings: ComputeTimings },
  ): void {
    const end = process.hrtime.bigint();
    const at = (ns: bigint): bigint => (ns < end ? ns : end);
    const computeStart = at(m.queueStart + BigInt(m.queueNs));
    const inputEnd = at(computeStart + BigInt(m.timings.computeInputNs));
    const outputStart = at(inputEnd + BigInt(m.timings.computeInferNs));
    this.record(id, model, version, requestId, {
      REQUEST_START: m.requestStart,
      QUEUE_START: m.queueStart,
      COMPUTE_START: computeStart,
      COMPUTE_INPUT_END: inputEnd,
      COMPUTE_OUTPUT_START: outputStart,
      COMPUTE_END: at(outputStart + BigInt(m.timings.computeOutputNs)),
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

  /** Closes the JSON array and the file. */
  close(): Promise<void> {
    const out = this.#out;
    if (!out) return Promise.resolve();
    this.#out = undefined;
    return new Promise((resolve) => out.end('\n]\n', () => resolve()));
  }
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
