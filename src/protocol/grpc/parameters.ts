import { InvalidArgError } from '../../core/errors.js';
import type { ParamValue, Parameters } from '../../core/inference.js';
import type { InferParameterMsg, Long, ParameterMap } from './messages.js';

/** `triton_` keys a client may send (Triton's TRITON_RESERVED_REQUEST_PARAMS). */
const RESERVED_ALLOWED: ReadonlySet<string> = new Set(['triton_enable_empty_final_response']);
const INT64_MAX = 2n ** 63n - 1n;

/** A 64-bit integer as a number when it is safe, else a bigint, so no value is ever rounded. */
export function longValue(v: Long): number | bigint {
  if (typeof v === 'number') return v;
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : BigInt(v);
}

const choiceOf = (p: InferParameterMsg): string => p.parameter_choice ?? 'no value';

/**
 * Request-level parameters with Triton's gRPC rules (grpc/infer_handler.cc): `priority` int64 ≥ 0 or
 * uint64, `timeout` int64, `sequence_*` typed, reserved `triton_` keys refused, and custom parameters
 * limited to int64/bool/string (double and uint64 are refused, as Triton does).
 */
export function requestParameters(map: ParameterMap): Parameters | undefined {
  const out: Parameters = {};
  for (const [key, p] of Object.entries(map)) {
    const choice = choiceOf(p);
    if (key === 'priority') {
      if (choice === 'int64_param' || choice === 'uint64_param') {
        const v = longValue((choice === 'int64_param' ? p.int64_param : p.uint64_param) as Long);
        if (v < 0) throw new InvalidArgError(`invalid value for 'priority', expected value >= 0.`);
        out[key] = v;
        continue;
      }
      throw new InvalidArgError(`invalid value type for 'priority' parameter, expected int64_param or uint64_param.`);
    }
    if (key === 'timeout' && choice !== 'int64_param') {
      throw new InvalidArgError(`invalid value type for 'timeout' parameter, expected int64_param.`);
    }
    if (key === 'sequence_id' && choice !== 'int64_param' && choice !== 'string_param') {
      throw new InvalidArgError(
        `invalid value type for 'sequence_id' parameter, expected int64_param or string_param.`,
      );
    }
    if ((key === 'sequence_start' || key === 'sequence_end') && choice !== 'bool_param') {
      throw new InvalidArgError(`invalid value type for '${key}' parameter, expected bool_param.`);
    }
    if (key.startsWith('triton_')) {
      if (!RESERVED_ALLOWED.has(key)) {
        throw new InvalidArgError(
          `parameter keys starting with 'triton_' are reserved for Triton usage. Only the following keys starting with 'triton_' are allowed: ${[...RESERVED_ALLOWED].join(' ')}`,
        );
      }
      if (choice !== 'bool_param') {
        throw new InvalidArgError(`invalid value type for '${key}' parameter, expected bool_param.`);
      }
      // Read by ModelStreamInfer for decoupled models (infer.ts); not a model parameter.
      continue;
    }
    out[key] = customValue(key, p);
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

function customValue(key: string, p: InferParameterMsg): ParamValue {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param as boolean;
    case 'int64_param':
      return longValue(p.int64_param as Long);
    case 'string_param':
      return p.string_param as string;
    default:
      throw new InvalidArgError(
        `invalid value type for '${key}' parameter, expected int64_param, bool_param, or string_param.`,
      );
  }
}

/**
 * Tensor-level parameters (input or requested output), every kind kept (int64 and uint64 exact, as number or
 * bigint); the shared-memory ones are taken out by the decoder (kserve/shared-memory-params.ts).
 */
export function tensorParameters(map: ParameterMap, where: string): Parameters {
  const out: Parameters = {};
  for (const [key, p] of Object.entries(map)) {
    switch (p.parameter_choice) {
      case 'bool_param':
        out[key] = p.bool_param as boolean;
        break;
      case 'int64_param':
        out[key] = longValue(p.int64_param as Long);
        break;
      case 'uint64_param':
        out[key] = longValue(p.uint64_param as Long);
        break;
      case 'string_param':
        out[key] = p.string_param as string;
        break;
      case 'double_param':
        out[key] = p.double_param as number;
        break;
      default:
        throw new InvalidArgError(`${where}: parameter '${key}' has no value`);
    }
  }
  return out;
}

/** Server-side parameters (response, output) as InferParameter messages. */
export function toParameterMap(params: Parameters | undefined): ParameterMap | undefined {
  if (params === undefined) return undefined;
  const out: ParameterMap = {};
  for (const [key, v] of Object.entries(params)) {
    if (typeof v === 'boolean') out[key] = { bool_param: v };
    else if (typeof v === 'string') out[key] = { string_param: v };
    else if (typeof v === 'bigint')
      out[key] = v <= INT64_MAX ? { int64_param: v.toString() } : { uint64_param: v.toString() };
    else if (Number.isInteger(v)) out[key] = { int64_param: v };
    else out[key] = { double_param: v };
  }
  return out;
}
