import { InvalidArgError } from '../core/errors.js';
import type { TraceOptions } from '../server/trace.js';
import type { FlagValues } from './flags.js';

/**
 * `--cache-config=local,size=<bytes>` (and the deprecated `--response-cache-byte-size`) → the local cache's size
 * in bytes, or undefined for no cache. Only Triton's `local` cache is built; `redis` is refused by name.
 */
export function parseCacheConfig(v: FlagValues): number | undefined {
  let size = v['response-cache-byte-size'];
  for (const entry of v['cache-config']) {
    const m = /^([^,=]+),([^=]+)=(.*)$/.exec(entry);
    if (!m)
      throw new InvalidArgError(
        `--cache-config '${entry}' must look like <cache>,<key>=<value> (e.g. local,size=1048576)`,
      );
    const [, cache, key, value] = m;
    if (cache !== 'local') {
      throw new InvalidArgError(
        cache === 'redis'
          ? `--cache-config: the redis cache is not implemented in Nereid; use local,size=<bytes>`
          : `--cache-config: unknown cache '${cache}' (Nereid has 'local')`,
      );
    }
    if (key !== 'size')
      throw new InvalidArgError(`--cache-config: unknown key '${key}' for the local cache (it has 'size')`);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
      throw new InvalidArgError(`--cache-config local,size must be a number of bytes, got '${value}'`);
    }
    size = Number(value);
  }
  return size;
}

/**
 * `--trace-config [<mode>,]<key>=<value>` entries (and the deprecated --trace-* flags) → trace options, as Triton:
 * `mode=triton|opentelemetry`, the global `level`, `rate`, `count`, `log-frequency`, `triton,file=<path>`, and
 * `opentelemetry,url=<host:port/path>`, `opentelemetry,resource=<key>=<value>` (repeatable),
 * `opentelemetry,bsp_max_queue_size|bsp_schedule_delay|bsp_max_export_batch_size=<n>`.
 */
export function parseTraceConfig(v: FlagValues): TraceOptions {
  const out: TraceOptions = {};
  if (v['trace-file'] !== undefined) out.file = v['trace-file'];
  if (v['trace-level'] !== undefined) out.level = v['trace-level'];
  if (v['trace-rate'] !== undefined) out.rate = v['trace-rate'];
  if (v['trace-count'] !== undefined) out.count = v['trace-count'];
  if (v['trace-log-frequency'] !== undefined) out.logFrequency = v['trace-log-frequency'];
  for (const entry of v['trace-config']) {
    let kv = entry;
    let section = '';
    const comma = entry.indexOf(',');
    if (comma >= 0 && !entry.slice(0, comma).includes('=')) {
      section = entry.slice(0, comma);
      if (section !== 'triton' && section !== 'opentelemetry') {
        throw new InvalidArgError(`--trace-config mode '${section}' is not supported (triton, opentelemetry)`);
      }
      kv = entry.slice(comma + 1);
    }
    const m = /^([a-z_-]+)=(.*)$/.exec(kv);
    if (!m) throw new InvalidArgError(`--trace-config '${entry}' must look like [<mode>,]<key>=<value>`);
    const [, key, value] = m;
    if (section === 'opentelemetry') otelSetting(out, key, value);
    else traceSetting(out, key, value);
  }
  return out;
}

function intSetting(key: string, value: string, min: number): number {
  if (!/^-?\d+$/.test(value) || Number(value) < min) {
    const bound = Number.isFinite(min) ? ` >= ${min}` : '';
    throw new InvalidArgError(`--trace-config ${key} must be an integer${bound}, got '${value}'`);
  }
  return Number(value);
}

function traceSetting(out: TraceOptions, key: string, value: string): void {
  if (key === 'file') out.file = value;
  else if (key === 'level') out.level = value;
  else if (key === 'rate') out.rate = intSetting(key, value, -Infinity);
  else if (key === 'count') out.count = intSetting(key, value, -Infinity);
  else if (key === 'log-frequency' || key === 'log_frequency') out.logFrequency = intSetting(key, value, -Infinity);
  else if (key === 'mode') {
    if (value !== 'triton' && value !== 'opentelemetry') {
      throw new InvalidArgError(`--trace-config mode '${value}' is not supported (triton, opentelemetry)`);
    }
    out.mode = value;
  } else {
    throw new InvalidArgError(`--trace-config: unknown key '${key}' (mode, file, level, rate, count, log-frequency)`);
  }
}

const BSP_KEYS = {
  bsp_max_queue_size: 'bspMaxQueueSize',
  bsp_schedule_delay: 'bspScheduleDelayMs',
  bsp_max_export_batch_size: 'bspMaxExportBatchSize',
} as const;

function otelSetting(out: TraceOptions, key: string, value: string): void {
  const otel = (out.otel ??= {});
  if (key === 'url') otel.url = value;
  else if (key === 'resource') {
    const eq = value.indexOf('=');
    if (eq <= 0)
      throw new InvalidArgError(`--trace-config opentelemetry,resource must be <key>=<value>, got '${value}'`);
    otel.resource = { ...otel.resource, [value.slice(0, eq)]: value.slice(eq + 1) };
  } else if (key in BSP_KEYS) {
    otel[BSP_KEYS[key as keyof typeof BSP_KEYS]] = intSetting(key, value, 1);
  } else {
    throw new InvalidArgError(
      `--trace-config opentelemetry: unknown key '${key}' (url, resource, ${Object.keys(BSP_KEYS).join(', ')})`,
    );
  }
}
