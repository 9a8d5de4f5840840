import { InvalidArgError } from '../core/errors.js';
import type { RateLimitResource } from '../backends/runtime/rate-limiter.js';

/**
 * `--rate-limit` and `--rate-limit-resource` (Triton's rate limiter, src/backends/runtime/rate-limiter.ts): the
 * table rows live in flags.ts; their syntax and Triton's messages for bad values live here, apart from the other
 * flags.
 */

/** `--rate-limit=execution_count|off` (any case, as Triton); absent = off. */
export function parseRateLimitMode(value: string | undefined): 'off' | 'execution_count' {
  if (value === undefined) return 'off';
  const mode = value.toLowerCase();
  if (mode === 'execution_count' || mode === 'off') return mode;
  throw new InvalidArgError(`invalid argument for --rate-limit: '${value}' (use execution_count or off)`);
}

/** `--rate-limit-resource=<name>:<count>[:<device>]`, repeatable. */
export function parseRateLimitResources(entries: readonly string[]): RateLimitResource[] {
  return entries.map((entry) => {
    const parts = entry.split(':');
    const [name, count, device] = parts;
    const int = (s: string | undefined): s is string => s !== undefined && /^\d+$/.test(s) && Number.isSafeInteger(+s);
    if (parts.length < 2 || parts.length > 3 || name === '' || !int(count) || (parts.length === 3 && !int(device))) {
      throw new InvalidArgError(
        `--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'. Got ${entry}`,
      );
    }
    return device === undefined
      ? { name, count: Number(count) }
      : { name, count: Number(count), device: Number(device) };
  });
}
