import { InvalidArgError } from '../../core/errors.js';
import type { Parameters, ParamValue, SharedMemoryRef } from '../../core/inference.js';

/**
 * Triton's shared-memory tensor parameters, read the same way from HTTP JSON and gRPC InferParameters (both are
 * `Parameters` by then): `shared_memory_region` (string), `shared_memory_offset` and `shared_memory_byte_size`
 * (unsigned 64-bit, default 0). The keys are taken out of `params`. Sizes stay bigint: a client may send 2^64 − 32,
 * and the bounds checks (server/shm/regions.ts) are done in 64-bit arithmetic.
 */
export const SHARED_MEMORY_KEYS = ['shared_memory_region', 'shared_memory_offset', 'shared_memory_byte_size'] as const;

function uint64(params: Parameters, key: string): bigint {
  const v: ParamValue | undefined = params[key];
  delete params[key];
  if (v === undefined) return 0n;
  if (typeof v === 'bigint' && v >= 0n) return v;
  // A JSON number past 2^53 arrives rounded (Node 20 has no source text for JSON.parse); it stays an integer.
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v);
  throw new InvalidArgError(`Unable to parse '${key}': expected an unsigned integer, got ${JSON.stringify(String(v))}`);
}

/** The shared-memory slice named by `params`, or undefined when it names none (any of the keys counts). */
export function takeSharedMemoryRef(params: Parameters): SharedMemoryRef | undefined {
  if (!SHARED_MEMORY_KEYS.some((k) => k in params)) return undefined;
  const region = params.shared_memory_region;
  delete params.shared_memory_region;
  if (typeof region !== 'string') {
    throw new InvalidArgError(
      region === undefined
        ? "'shared_memory_offset' and 'shared_memory_byte_size' need 'shared_memory_region'"
        : "Unable to parse 'shared_memory_region': expected a string",
    );
  }
  return {
    region,
    offset: uint64(params, 'shared_memory_offset'),
    byteSize: uint64(params, 'shared_memory_byte_size'),
  };
}
