import { DATATYPES, isDataType, type DataType, type FixedTypedArray } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { InferInput, InferRequest, RequestedOutput } from '../../core/inference.js';
import { elementCount, type TensorData } from '../../core/tensor.js';
import { rawToTensorData } from '../../core/raw-tensor.js';
import { takeSharedMemoryRef } from '../kserve/shared-memory-params.js';
import { checkShapeSize } from '../kserve/shape.js';
import type { InferInputTensorMsg, InferTensorContentsMsg, Long, ModelInferRequestMsg } from './messages.js';
import { longValue, requestParameters, tensorParameters } from './parameters.js';

/** An empty placeholder for an input whose data the server reads from shared memory. */
const NO_DATA = new Uint8Array(0);

/**
 * ModelInferRequest → InferRequest. Only what is gRPC-specific lives here (which contents field holds the
 * data, raw contents pairing, parameter kinds); model checks (datatype, shape, unknown inputs and outputs)
 * are the facade's, so HTTP and gRPC answer them with the same words.
 */
export function decodeModelInferRequest(msg: ModelInferRequestMsg): InferRequest {
  const model = msg.model_name;
  const raw = msg.raw_input_contents;
  if (raw.length > msg.inputs.length) {
    throw new InvalidArgError(
      `expected ${msg.inputs.length} raw_input_contents (one per input) for model '${model}', got ${raw.length}`,
    );
  }
  const request: InferRequest = { model, inputs: [] };
  if (msg.model_version !== '') request.version = msg.model_version;
  if (msg.id !== '') request.id = msg.id;
  const params = requestParameters(msg.parameters);
  if (params) request.parameters = params;
  let rawIndex = 0;
  for (const io of msg.inputs) {
    const datatype = inputDatatype(io);
    const shape = checkShapeSize(
      io.name,
      io.shape.map((d) => shapeDim(d, io.name)),
      datatype,
    );
    const tp = tensorParameters(io.parameters, `input '${io.name}'`);
    // An input in shared memory takes no raw content: raw_input_contents pair with the other inputs, in order.
    const sharedMemory = takeSharedMemoryRef(tp);
    let data: TensorData;
    if (sharedMemory !== undefined) {
      if (io.contents !== null) {
        throw new InvalidArgError(
          `input '${io.name}' for model '${model}' sets both 'contents' and 'shared_memory_region'; use one`,
        );
      }
      elementCount(shape, `input '${io.name}'`);
      data = NO_DATA;
    } else if (io.contents !== null && raw.length > 0) {
      throw new InvalidArgError(
        `contents field must not be specified when using raw_input_contents for '${io.name}' for model '${model}'`,
      );
    } else if (io.contents !== null) {
      data = typedContents(io.name, datatype, shape, io.contents, model);
    } else if (rawIndex < raw.length) {
      data = rawToTensorData(io.name, datatype, shape, raw[rawIndex++], model);
    } else {
      throw new InvalidArgError(`unable to find data for input tensor '${io.name}' for model '${model}' in request.`);
    }
    const input: InferInput = { name: io.name, datatype, shape, data };
    if (sharedMemory !== undefined) input.sharedMemory = sharedMemory;
    if (Object.keys(tp).length > 0) input.parameters = tp;
    request.inputs.push(input);
  }
  if (msg.outputs.length > 0) {
    request.outputs = msg.outputs.map((o): RequestedOutput => {
      const params = tensorParameters(o.parameters, `output '${o.name}'`);
      const out: RequestedOutput = { name: o.name };
      const sharedMemory = takeSharedMemoryRef(params);
      if (sharedMemory !== undefined) out.sharedMemory = sharedMemory;
      const classCount = params.classification;
      if (classCount !== undefined) {
        delete params.classification;
        if (typeof classCount !== 'number' || !Number.isSafeInteger(classCount) || classCount < 0) {
          throw new InvalidArgError(`parameter 'classification' of output '${o.name}' must be a non-negative int64`);
        }
        if (classCount > 0) out.classCount = classCount;
      }
      // tritonclient's HTTP-style hint; outputs always travel as raw_output_contents over gRPC.
      delete params.binary_data;
      if (Object.keys(params).length > 0) out.parameters = params;
      return out;
    });
  }
  return request;
}

function inputDatatype(io: InferInputTensorMsg): DataType {
  if (!isDataType(io.datatype)) {
    throw new InvalidArgError(`input '${io.name}': unknown datatype '${io.datatype}'`);
  }
  return io.datatype;
}

/** One dim, exact (a bigint past 2^53); checkShapeSize then says whether the shape fits. */
function shapeDim(d: Long, name: string): number | bigint {
  const v = longValue(d);
  if (v < 0) {
    throw new InvalidArgError(`input '${name}': invalid shape dim ${String(d)}: dims must be non-negative integers`);
  }
  return v;
}

/** Datatypes each typed contents field may carry (Triton widens small integers to 32 bits on the wire). */
const FIELD_TYPES: Readonly<Record<keyof InferTensorContentsMsg, readonly DataType[]>> = {
  bool_contents: ['BOOL'],
  int_contents: ['INT8', 'INT16', 'INT32'],
  int64_contents: ['INT64'],
  uint_contents: ['UINT8', 'UINT16', 'UINT32'],
  uint64_contents: ['UINT64'],
  fp32_contents: ['FP32'],
  fp64_contents: ['FP64'],
  bytes_contents: ['BYTES'],
};

/**
 * Typed `contents`: exactly one field may be set and it must suit the input's datatype; the element count
 * is checked with the same byte-size wording as raw data so clients see one message for one mistake.
 */
function typedContents(
  name: string,
  datatype: DataType,
  shape: number[],
  contents: InferTensorContentsMsg,
  model: string,
): TensorData {
  let field: keyof InferTensorContentsMsg | undefined;
  for (const key of Object.keys(FIELD_TYPES) as (keyof InferTensorContentsMsg)[]) {
    if (contents[key].length === 0) continue;
    if (field !== undefined) {
      throw new InvalidArgError(
        `unexpected explicit tensor data for input tensor '${name}' for model '${model}', binary data was already supplied.`,
      );
    }
    if (!FIELD_TYPES[key].includes(datatype)) {
      throw new InvalidArgError(
        `unexpected explicit tensor data for input tensor '${name}' for model '${model}' of type '${FIELD_TYPES[key][FIELD_TYPES[key].length - 1]}', expected datatype '${datatype}'`,
      );
    }
    field = key;
  }
  const count = elementCount(shape, `input '${name}'`);
  const values = field === undefined ? [] : contents[field];
  if (values.length !== count) {
    const size = DATATYPES[datatype].byteSize;
    throw new InvalidArgError(
      size > 0
        ? `input byte size mismatch for input '${name}' for model '${model}'. Expected ${count * size}, got ${values.length * size}`
        : `expected ${count} string elements for inference input '${name}' for model '${model}', got ${values.length}`,
    );
  }
  if (datatype === 'BYTES') return (values as Uint8Array[]).slice();
  const Ctor = DATATYPES[datatype].array;
  if (Ctor === undefined) throw new InvalidArgError(`input '${name}': datatype ${datatype} has no typed contents`);
  const out = new Ctor(count) as FixedTypedArray;
  if (out instanceof BigInt64Array || out instanceof BigUint64Array) {
    for (let i = 0; i < count; i++) out[i] = BigInt(values[i] as Long);
  } else if (datatype === 'BOOL') {
    for (let i = 0; i < count; i++) out[i] = values[i] ? 1 : 0;
  } else {
    (out as Exclude<FixedTypedArray, BigInt64Array | BigUint64Array>).set(values as number[]);
  }
  return out;
}
