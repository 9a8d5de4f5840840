import { InvalidArgError } from '../core/errors.js';
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

/** `--trace-config [triton,]<key>=<value>` entries (and the deprecated --trace-* flags) → trace options. */
export function parseTraceConfig(v: FlagValues): {
  file?: string;
  level?: string;
  rate?: number;
  count?: number;
  logFrequency?: number;
} {
  const out: { file?: string; level?: string; rate?: number; count?: number; logFrequency?: number } = {};
  if (v['trace-file'] !== undefined) out.file = v['trace-file'];
  if (v['trace-level'] !== undefined) out.level = v['trace-level'];
  if (v['trace-rate'] !== undefined) out.rate = v['trace-rate'];
  if (v['trace-count'] !== undefined) out.count = v['trace-count'];
  if (v['trace-log-frequency'] !== undefined) out.logFrequency = v['trace-log-frequency'];
  for (const entry of v['trace-config']) {
    let kv = entry;
    const comma = entry.indexOf(',');
    if (comma >= 0 && !entry.slice(0, comma).includes('=')) {
      const mode = entry.slice(0, comma);
      if (mode !== 'triton') {
        throw new InvalidArgError(
          `--trace-config mode '${mode}' is not supported (only 'triton'; OpenTelemetry is not implemented)`,
        );
      }
      kv = entry.slice(comma + 1);
    }
    const m = /^([a-z_-]+)=(.*)$/.exec(kv);
    if (!m) throw new InvalidArgError(`--trace-config '${entry}' must look like [triton,]<key>=<value>`);
    const [, key, value] = m;
    const int = (): number => {
      if (!/^-?\d+$/.test(value)) throw new InvalidArgError(`--trace-config ${key} must be an integer, got '${value}'`);
      return Number(value);
    };
    if (key === 'file') out.file = value;
    else if (key === 'level') out.level = value;
    else if (key === 'rate') out.rate = int();
    else if (key === 'count') out.count = int();
    else if (key === 'log-frequency' || key === 'log_frequency') out.logFrequency = int();
    else throw new InvalidArgError(`--trace-config: unknown key '${key}' (file, level, rate, count, log-frequency)`);
  }
  return out;
}
