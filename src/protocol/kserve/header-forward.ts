import { InvalidArgError } from '../../core/errors.js';

/**
 * Triton's `--http-header-forward-pattern`: request headers whose name matches the pattern (case-insensitive)
 * become string parameters of the inference request, named as the header, so that a model sees them
 * (`request.parameters()` in Python). Parameters the request itself sets win, and the names Triton reserves for
 * scheduling are never taken from a header (a `priority` header must not reorder the queue).
 */
const RESERVED = new Set([
  'sequence_id',
  'sequence_start',
  'sequence_end',
  'priority',
  'timeout',
  'binary_data_output',
  'headers',
]);

/** The flag's pattern, compiled once at start; a pattern that is not a regular expression fails start-up. */
export function compileForwardPattern(flag: string, pattern: string | undefined): RegExp | undefined {
  if (pattern === undefined || pattern === '') return undefined;
  try {
    return new RegExp(`^(?:${pattern})$`, 'i');
  } catch (err) {
    throw new InvalidArgError(`--${flag} '${pattern}' is not a regular expression: ${(err as Error).message}`);
  }
}

/** The headers to forward, as parameters (a repeated header's values joined with ', ', as HTTP does). */
export function forwardedHeaders(
  pattern: RegExp,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || RESERVED.has(name) || name.startsWith('triton_') || !pattern.test(name)) continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}
