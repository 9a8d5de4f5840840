import { DATATYPES, isDataType, type FixedTypedArray } from '../core/datatypes.js';
import { InternalError } from '../core/errors.js';
import { elementCount } from '../core/tensor.js';
import { InferResult } from './result.js';
import { fromWireBytes, wireBytes, type WireInput } from './tensors.js';
import type { ClientParameters, ClientParamValue, OutputTensor, RequestedOutput } from './types.js';

/**
 * InferResult/inputs ↔ the plain objects @grpc/proto-loader serialises as inference.ModelInferRequest and reads
 * from ModelInferResponse (snake_case, int64 as numbers, only the set oneof member present: see grpc.ts for the loader
 * options). Tensors travel in raw_input_contents / raw_output_contents, as tritonclient sends them: protobuf's
 * repeated fields cost an allocation per element.
 */

/** InferParameter / ModelRepositoryParameter as the loader reads and writes it. */
export interface ParameterMsg {
  bool_param?: boolean;
  int64_param?: number | string;
  string_param?: string;
  double_param?: number;
  uint64_param?: number | string;
  bytes_param?: Uint8Array;
}

/** A ModelInferResponse as the loader hands it over. */
export interface ModelInferResponseMsg {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Record<string, ParameterMsg>;
  outputs: {
    name: string;
    datatype: string;
    shape: (number | string)[];
    parameters?: Record<string, ParameterMsg>;
    contents?: Record<string, unknown[]> | null;
  }[];
  raw_output_contents: Uint8Array[];
}

/** One parameter value as InferParameter: integers as int64 (bigint exact, as a decimal string), others by type. */
export function toParameterMsg(v: ClientParamValue): ParameterMsg {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'string') return { string_param: v };
  if (typeof v === 'bigint') return { int64_param: v.toString() };
  return Number.isInteger(v) ? { int64_param: v } : { double_param: v };
}

function toParameterMap(params: ClientParameters | undefined): Record<string, ParameterMsg> {
  const out: Record<string, ParameterMsg> = {};
  for (const [k, v] of Object.entries(params ?? {})) out[k] = toParameterMsg(v);
  return out;
}

const PARAMETER_MEMBERS = ['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'] as const;

function fromParameterMap(map: Record<string, ParameterMsg> | undefined): ClientParameters {
  const out: ClientParameters = {};
  for (const [k, p] of Object.entries(map ?? {})) {
    // The loader sets only the oneof member that was on the wire (see grpc.ts, `oneofs: false`).
    const member = PARAMETER_MEMBERS.find((m) => p[m] !== undefined && p[m] !== null);
    const v = member === undefined ? undefined : p[member];
    if (typeof v === 'boolean' || typeof v === 'number' || typeof v === 'string') out[k] = v;
  }
  return out;
}

/** The ModelInferRequest for `inputs`. */
export function encodeModelInferRequest(
  model: string,
  inputs: readonly WireInput[],
  opts: { version?: string; id?: string; parameters?: ClientParameters; outputs?: readonly RequestedOutput[] },
): Record<string, unknown> {
  return {
    model_name: model,
    model_version: opts.version ?? '',
    id: opts.id ?? '',
    parameters: toParameterMap(opts.parameters),
    inputs: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape })),
    outputs: (opts.outputs ?? []).map((o) => {
      const parameters = toParameterMap(o.parameters);
      if (o.classCount !== undefined && o.classCount > 0) parameters.classification = { int64_param: o.classCount };
      return { name: o.name, parameters };
    }),
    raw_input_contents: inputs.map((t) => wireBytes(t.data)),
  };
}

/** Typed `contents` (other servers may answer with them instead of raw contents) → tensor data. */
function fromContents(
  name: string,
  datatype: keyof typeof DATATYPES,
  count: number,
  contents: Record<string, unknown[]>,
): FixedTypedArray | Uint8Array[] {
  if (datatype === 'BYTES') return (contents.bytes_contents ?? []) as Uint8Array[];
  const field: Record<string, string> = {
    BOOL: 'bool_contents',
    INT8: 'int_contents',
    INT16: 'int_contents',
    INT32: 'int_contents',
    INT64: 'int64_contents',
    UINT8: 'uint_contents',
    UINT16: 'uint_contents',
    UINT32: 'uint_contents',
    UINT64: 'uint64_contents',
    FP32: 'fp32_contents',
    FP64: 'fp64_contents',
  };
  const values = contents[field[datatype] ?? ''];
  const Ctor = DATATYPES[datatype].array;
  if (values === undefined || Ctor === undefined || values.length !== count) {
    throw new InternalError(`output '${name}': ${datatype} has neither raw contents nor ${count} typed contents`);
  }
  const out = new Ctor(count);
  const big = datatype === 'INT64' || datatype === 'UINT64';
  for (let i = 0; i < count; i++) out[i] = big ? BigInt(values[i] as string) : Number(values[i]);
  return out;
}

/** A ModelInferResponse → InferResult. */
export function decodeModelInferResponse(msg: ModelInferResponseMsg): InferResult {
  const outputs: OutputTensor[] = msg.outputs.map((o, i) => {
    if (!isDataType(o.datatype)) throw new InternalError(`output '${o.name}': unknown datatype '${o.datatype}'`);
    const shape = o.shape.map(Number);
    const raw = msg.raw_output_contents[i];
    const data =
      raw !== undefined
        ? fromWireBytes(o.name, o.datatype, shape, raw)
        : fromContents(o.name, o.datatype, elementCount(shape), o.contents ?? {});
    const out: OutputTensor = { name: o.name, datatype: o.datatype, shape, data };
    const parameters = fromParameterMap(o.parameters);
    if (Object.keys(parameters).length > 0) out.parameters = parameters;
    return out;
  });
  return new InferResult({
    model: msg.model_name,
    version: msg.model_version,
    id: msg.id,
    parameters: fromParameterMap(msg.parameters),
    outputs,
  });
}
