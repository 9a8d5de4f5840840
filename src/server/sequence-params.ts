import { InvalidArgError } from '../core/errors.js';
import type { Parameters } from '../core/inference.js';

/**
 * Triton's sequence extension: the request parameters `sequence_id` (an unsigned integer or a string; 0 and ''
 * mean none), `sequence_start` and `sequence_end` (booleans). They are taken out of the request's parameters
 * here, once for HTTP and gRPC: they steer the sequence batcher and are not custom parameters for the engine.
 */

export interface SequenceParams {
  /** undefined when the request names no sequence (absent, 0 or ''). */
  correlationId: bigint | string | undefined;
  start: boolean;
  end: boolean;
}

const KEYS = ['sequence_id', 'sequence_start', 'sequence_end'] as const;

function correlationId(v: unknown): bigint | string | undefined {
  if (typeof v === 'string') return v === '' ? undefined : v;
  // A negative id is refused on both protocols (gRPC carries it as int64): read as the two's complement of a uint64
  // it named a different sequence than the client wrote (-1 became 18446744073709551615).
  if (typeof v === 'bigint' && v >= 0n && v < 2n ** 64n) return v === 0n ? undefined : v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return v === 0 ? undefined : BigInt(v);
  throw new InvalidArgError(
    `parameter 'sequence_id' must be an unsigned integer or a string, got ${JSON.stringify(String(v))}`,
  );
}

function flag(params: Parameters, key: string): boolean {
  const v = params[key];
  if (v === undefined) return false;
  if (typeof v !== 'boolean') {
    throw new InvalidArgError(`parameter '${key}' must be a boolean, got ${JSON.stringify(String(v))}`);
  }
  return v;
}

/**
 * Splits `params` into the sequence parameters (undefined when the request names no sequence and sets no flag)
 * and the rest (the same object when it held none of them).
 */
export function takeSequenceParams(params: Parameters | undefined): {
  sequence: SequenceParams | undefined;
  rest: Parameters | undefined;
} {
  if (params === undefined || !KEYS.some((k) => k in params)) return { sequence: undefined, rest: params };
  const id = correlationId(params.sequence_id ?? '');
  const start = flag(params, 'sequence_start');
  const end = flag(params, 'sequence_end');
  const rest: Parameters = { ...params };
  for (const k of KEYS) delete rest[k];
  const sequence = id === undefined && !start && !end ? undefined : { correlationId: id, start, end };
  return { sequence, rest: Object.keys(rest).length > 0 ? rest : undefined };
}
