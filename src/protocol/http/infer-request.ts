import type { ResolvedModel } from '../../server/api.js';
import { DATATYPES, isDataType, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { InferInput, InferRequest, Parameters, RequestedOutput } from '../../core/inference.js';
import { elementCount, viewFixed, type TensorData } from '../../core/tensor.js';
import { jsonToTensorData, parseJson } from '../kserve/json-tensor.js';
import { rawToTensorData } from '../../core/raw-tensor.js';
import { takeSharedMemoryRef } from '../kserve/shared-memory-params.js';
import { checkShapeSize } from '../kserve/shape.js';

/** Which outputs go back as binary blobs: per-output `binary_data`, else the request's `binary_data_output`. */
export interface OutputPlan {
  binaryDefault: boolean;
  binary: ReadonlyMap<string, boolean>;
}

/** A decoded HTTP infer request plus how its response must be encoded. */
export interface DecodedInfer {
  request: InferRequest;
  plan: OutputPlan;
}

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/**
 * Parses `Inference-Header-Content-Length` (Triton's wording for each failure). Undefined: no header, the whole
 * body is JSON. 0: a raw binary request.
 */
export function parseHeaderLength(value: string | undefined, bodyLength: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (!/^[+-]?\d+$/.test(text)) {
    throw new InvalidArgError(`Unable to parse Inference-Header-Content-Length, got: ${value}`);
  }
  const n = Number(text);
  if (n < INT32_MIN || n > INT32_MAX) {
    throw new InvalidArgError(
      `Unable to parse Inference-Header-Content-Length, value is out of range [ ${INT32_MIN}, ${INT32_MAX} ], got: ${value}`,
    );
  }
  if (n < 0 || n > bodyLength) {
    throw new InvalidArgError(`inference header size should be in range [0, ${bodyLength}], got: ${n}`);
  }
  return n;
}

const kindOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(obj: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(obj, key) ? obj[key] : undefined;
}

/** Request/tensor parameters: scalar values only; `triton_` keys are reserved (Triton refuses them too). */
function parseParameters(raw: unknown, where: string): Parameters {
  if (!isObject(raw)) throw new InvalidArgError(`Unable to parse 'parameters' of ${where}: expected an object`);
  const out: Parameters = {};
  for (const [key, value] of Object.entries(raw)) {
    if (key.startsWith('triton_')) {
      throw new InvalidArgError(
        `parameter keys starting with 'triton_' are reserved for Triton usage and should not be specified (got '${key}')`,
      );
    }
    if (
      typeof value !== 'string' &&
      typeof value !== 'number' &&
      typeof value !== 'boolean' &&
      typeof value !== 'bigint'
    ) {
      throw new InvalidArgError(
        `parameter '${key}' of ${where} must be a string, number or boolean, got ${kindOf(value)}`,
      );
    }
    out[key] = value;
  }
  return out;
}

function takeBool(params: Parameters, key: string, where: string): boolean | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  delete params[key];
  if (typeof v !== 'boolean') throw new InvalidArgError(`parameter '${key}' of ${where} must be a boolean`);
  return v;
}

function takeCount(params: Parameters, key: string, where: string): number | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  delete params[key];
  const n = typeof v === 'bigint' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new InvalidArgError(`parameter '${key}' of ${where} must be a non-negative integer`);
  }
  return n;
}

/** Triton's rule (ValidateInputContentType): an input brings its data one way only. */
function checkOneSource(data: boolean, binary: boolean, shm: boolean): void {
  const set = Number(data) + Number(binary) + Number(shm);
  if (set === 1) return;
  const names = [data && "'data'", binary && "'binary_data_size'", shm && "'shared_memory_region'"].filter(Boolean);
  throw new InvalidArgError(
    "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', " +
      `'shared_memory_region' in 'parameters'. But ${set === 0 ? 'no field is set' : `set ${names.join(' ')}`}`,
  );
}

/** An empty placeholder for an input whose data the server reads from shared memory. */
const NO_DATA = new Uint8Array(0);

function requireString(obj: Record<string, unknown>, key: string, where: string): string {
  const v = field(obj, key);
  if (v === undefined) throw new InvalidArgError(`Unable to parse '${key}' of ${where}: missing`);
  if (typeof v !== 'string') throw new InvalidArgError(`Unable to parse '${key}' of ${where}: expected a string`);
  return v;
}

function parseShape(raw: unknown, name: string, datatype: DataType): number[] {
  const where = `input '${name}'`;
  if (!Array.isArray(raw)) {
    throw new InvalidArgError(
      `Unable to parse 'shape' of ${where}: ${raw === undefined ? 'missing' : 'expected an array'}`,
    );
  }
  for (const d of raw) {
    // A literal past 2^53 arrives as an exact bigint (parseJson); checkShapeSize answers it in Triton's words.
    if (typeof d === 'bigint' && d >= 0n) continue;
    if (typeof d !== 'number' || !Number.isSafeInteger(d) || d < 0) {
      // Only a number is printed: String() of a dim nested 10^5 deep recursed past the stack (a 500).
      throw new InvalidArgError(
        `Unable to parse 'shape' of ${where}: dims must be non-negative integers, got ${typeof d === 'number' ? String(d) : kindOf(d)}`,
      );
    }
  }
  return checkShapeSize(name, raw as (number | bigint)[], datatype);
}

/**
 * Decodes `inputs[i]` into `request.inputs`; returns the offset past the blob it consumed. A plain function with
 * its state passed in, not a closure, so the hot path allocates nothing per input beyond the input itself.
 */
function decodeInput(
  raw: unknown,
  i: number,
  request: InferRequest,
  seen: Set<string>,
  body: Uint8Array,
  headerLength: number | undefined,
  offset: number,
): number {
  const model = request.model;
  if (!isObject(raw)) throw new InvalidArgError(`Unable to parse 'inputs[${i}]': expected an object`);
  const name = requireString(raw, 'name', `inputs[${i}]`);
  const where = `input '${name}'`;
  if (seen.has(name)) throw new InvalidArgError(`input '${name}' already exists in request`);
  seen.add(name);
  const dt = requireString(raw, 'datatype', where);
  if (!isDataType(dt)) throw new InvalidArgError(`${where}: unknown datatype '${dt}'`);
  const shape = parseShape(field(raw, 'shape'), name, dt);
  const params = field(raw, 'parameters') === undefined ? {} : parseParameters(field(raw, 'parameters'), where);
  const data = field(raw, 'data');
  checkOneSource(data !== undefined, 'binary_data_size' in params, 'shared_memory_region' in params);
  const sharedMemory = takeSharedMemoryRef(params);
  const binarySize = takeCount(params, 'binary_data_size', where);
  let tensorData: TensorData;
  if (sharedMemory !== undefined) {
    elementCount(shape, where);
    tensorData = NO_DATA;
  } else if (binarySize !== undefined) {
    if (headerLength === undefined) {
      throw new InvalidArgError(
        `must specify valid 'Inference-Header-Content-Length' in request header and 'binary_data_size' when passing inputs in binary data format (${where})`,
      );
    }
    if (offset + binarySize > body.byteLength) {
      throw new InvalidArgError(
        `unexpected size for input '${name}', expecting ${binarySize} additional bytes for model '${model}' but only ${body.byteLength - offset} remain`,
      );
    }
    tensorData = rawToTensorData(name, dt, shape, body.subarray(offset, offset + binarySize), model);
    offset += binarySize;
  } else {
    if (data === undefined) throw new InvalidArgError(`unable to find data for input tensor '${name}'`);
    elementCount(shape, where);
    tensorData = jsonToTensorData(name, dt, shape, data);
  }
  const input: InferInput = { name, datatype: dt, shape, data: tensorData };
  if (sharedMemory !== undefined) input.sharedMemory = sharedMemory;
  if (Object.keys(params).length > 0) input.parameters = params;
  request.inputs.push(input);
  return offset;
}

/** Decodes `outputs[i]`, recording in `binary` whether it goes back as a blob. */
function decodeOutput(raw: unknown, i: number, binary: Map<string, boolean>, binaryDefault: boolean): RequestedOutput {
  if (!isObject(raw)) throw new InvalidArgError(`Unable to parse 'outputs[${i}]': expected an object`);
  const name = requireString(raw, 'name', `outputs[${i}]`);
  const where = `output '${name}'`;
  if (binary.has(name)) throw new InvalidArgError(`output '${name}' already exists in request`);
  const params = field(raw, 'parameters') === undefined ? {} : parseParameters(field(raw, 'parameters'), where);
  const out: RequestedOutput = { name };
  if ('shared_memory_region' in params) {
    // Triton's ValidateOutputParameter: shared memory excludes classification and an explicit binary_data.
    if ('classification' in params) {
      throw new InvalidArgError("Output can't set both 'shared_memory_region' and 'classification'");
    }
    if (params.binary_data === true) {
      throw new InvalidArgError("Output can't set both 'shared_memory_region' and 'binary_data'");
    }
  }
  const sharedMemory = takeSharedMemoryRef(params);
  if (sharedMemory !== undefined) out.sharedMemory = sharedMemory;
  binary.set(name, takeBool(params, 'binary_data', where) ?? binaryDefault);
  const classCount = takeCount(params, 'classification', where);
  if (classCount !== undefined && classCount > 0) out.classCount = classCount;
  if (Object.keys(params).length > 0) out.parameters = params;
  return out;
}

/**
 * Decodes a JSON (+ binary) infer request. `headerLength` undefined means the whole body is JSON; blobs follow
 * the header and are consumed in input order by inputs carrying `binary_data_size`. Tensors are views of `body`.
 */
export function decodeInferRequest(
  model: string,
  version: string | undefined,
  body: Uint8Array,
  headerLength: number | undefined,
): DecodedInfer {
  const jsonEnd = headerLength ?? body.byteLength;
  const text = Buffer.from(body.buffer, body.byteOffset, jsonEnd).toString('utf8');
  let doc: unknown;
  try {
    doc = parseJson(text);
  } catch (err) {
    throw new InvalidArgError(`failed to parse the request JSON buffer: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(doc)) throw new InvalidArgError(`failed to parse the request JSON buffer: expected an object`);

  const request: InferRequest = { model, version, inputs: [] };
  const id = field(doc, 'id');
  if (id !== undefined) {
    if (typeof id !== 'string') throw new InvalidArgError(`Unable to parse 'id': expected a string`);
    request.id = id;
  }
  let binaryDefault = false;
  const rawParams = field(doc, 'parameters');
  if (rawParams !== undefined) {
    const params = parseParameters(rawParams, 'the request');
    binaryDefault = takeBool(params, 'binary_data_output', 'the request') ?? false;
    if (Object.keys(params).length > 0) request.parameters = params;
  }

  const rawInputs = field(doc, 'inputs');
  if (!Array.isArray(rawInputs)) {
    throw new InvalidArgError(`Unable to parse 'inputs': ${rawInputs === undefined ? 'missing' : 'expected an array'}`);
  }
  let offset = jsonEnd;
  const seen = new Set<string>();
  for (let i = 0; i < rawInputs.length; i++) {
    offset = decodeInput(rawInputs[i], i, request, seen, body, headerLength, offset);
  }
  if (offset !== body.byteLength) {
    throw new InvalidArgError(
      `unexpected additional input data for model '${model}': ${body.byteLength - offset} bytes after the last input`,
    );
  }

  const binary = new Map<string, boolean>();
  const rawOutputs = field(doc, 'outputs');
  if (rawOutputs !== undefined) {
    if (!Array.isArray(rawOutputs)) throw new InvalidArgError(`Unable to parse 'outputs': expected an array`);
    const outputs: RequestedOutput[] = [];
    for (let i = 0; i < rawOutputs.length; i++) outputs.push(decodeOutput(rawOutputs[i], i, binary, binaryDefault));
    request.outputs = outputs;
  }
  return { request, plan: { binaryDefault, binary } };
}

/**
 * Decodes a raw binary request (`Inference-Header-Content-Length: 0`): the body is the data of the model's only
 * input, batch 1, every output binary (Triton's rules). For BYTES the body is the content of the single element.
 */
export function decodeRawRequest(
  model: string,
  version: string | undefined,
  body: Uint8Array,
  meta: Pick<ResolvedModel, 'inputs' | 'maxBatchSize'>,
): DecodedInfer {
  const maxBatchSize = meta.maxBatchSize;
  if (meta.inputs.length !== 1) {
    throw new InvalidArgError(
      `Raw request must only have 1 input (found ${meta.inputs.length}) to be deduced but got ${meta.inputs.length} inputs in '${model}' model configuration. Send a JSON header with 'Inference-Header-Content-Length' instead`,
    );
  }
  const input = meta.inputs[0];
  const dims = maxBatchSize > 0 ? input.shape.slice(1) : input.shape.slice();
  const batch = maxBatchSize > 0 ? [1] : [];
  const plan: OutputPlan = { binaryDefault: true, binary: new Map() };
  const variable = dims.filter((d) => d < 0).length;
  if (variable > 1) {
    throw new InvalidArgError(
      `The shape of the raw input '${input.name}' can not be deduced because there are more than one variable-sized dimension`,
    );
  }
  const fixedElems = dims.reduce((p, d) => (d < 0 ? p : p * d), 1);
  if (input.datatype === 'BYTES') {
    // Triton's rule: the body is one element, so the dims must hold exactly one, with no variable dim ([-1] is
    // refused: the element count cannot be deduced from a body whose element boundaries are not on the wire).
    if (variable !== 0 || fixedElems !== 1) {
      throw new InvalidArgError(`For BYTE datatype raw input '${input.name}', the model must have input shape [1]`);
    }
    const data: TensorData = [body];
    return { request: { model, version, inputs: [{ ...input, shape: [...batch, ...dims], data }] }, plan };
  }
  const unit = fixedElems * DATATYPES[input.datatype].byteSize;
  if (
    unit === 0 ? body.byteLength !== 0 : body.byteLength % unit !== 0 || (variable === 0 && body.byteLength !== unit)
  ) {
    throw new InvalidArgError(
      `input byte size mismatch for input '${input.name}' for model '${model}'. Expected ${variable === 0 ? unit : `a multiple of ${unit}`}, got ${body.byteLength}`,
    );
  }
  const shape = [...batch, ...dims.map((d) => (d < 0 ? body.byteLength / unit : d))];
  return {
    request: {
      model,
      version,
      inputs: [{ name: input.name, datatype: input.datatype, shape, data: viewFixed(input.datatype, body) }],
    },
    plan,
  };
}
