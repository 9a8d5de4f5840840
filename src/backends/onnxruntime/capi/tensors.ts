import koffi from 'koffi';
import { DATATYPES, type DataType, type FixedTypedArray } from '../../../core/datatypes.js';
import { InternalError, InvalidArgError, UnsupportedError } from '../../../core/errors.js';
import type { BytesData, Tensor } from '../../../core/tensor.js';
import { check, ortApi, type Out, type Ptr } from './api.js';
import { PointerArray, pointerOf, type Handle } from './handles.js';

/**
 * Tensors between JavaScript and onnxruntime's OrtValues.
 *
 * Inputs: a fixed-size tensor becomes an OrtValue over the request's own memory (CreateTensorWithDataAsOrtValue
 * on the TypedArray's bytes, no copy). The caller keeps the TypedArray referenced until the run completed and
 * the OrtValue was released: the OrtValue only borrows it. BYTES become string tensors (onnxruntime copies the
 * strings into its own memory).
 *
 * Outputs: one copy from onnxruntime's buffer into a fresh ArrayBuffer JavaScript owns, then the OrtValue is
 * released by the caller.
 */

/** ONNXTensorElementDataType ↔ KServe datatype. */
const ELEMENT_TYPES: ReadonlyMap<number, DataType> = new Map([
  [1, 'FP32'],
  [2, 'UINT8'],
  [3, 'INT8'],
  [4, 'UINT16'],
  [5, 'INT16'],
  [6, 'INT32'],
  [7, 'INT64'],
  [8, 'BYTES'],
  [9, 'BOOL'],
  [10, 'FP16'],
  [11, 'FP64'],
  [12, 'UINT32'],
  [13, 'UINT64'],
  [16, 'BF16'],
]);
const ELEMENT_OF: ReadonlyMap<DataType, number> = new Map([...ELEMENT_TYPES].map(([k, v]) => [v, k]));

/** ONNX element type names, for messages about types Nereid has no datatype for. */
const ONNX_TYPE_NAMES: Record<number, string> = {
  14: 'complex64',
  15: 'complex128',
  17: 'float8e4m3fn',
  18: 'float8e4m3fnuz',
  19: 'float8e5m2',
  20: 'float8e5m2fnuz',
  21: 'uint4',
  22: 'int4',
  23: 'float4e2m1',
};

export function dataTypeOfElement(elementType: number): DataType | undefined {
  return ELEMENT_TYPES.get(elementType);
}

export function elementTypeName(elementType: number): string {
  return ONNX_TYPE_NAMES[elementType] ?? `element type ${elementType}`;
}

export function elementOf(datatype: DataType): number {
  const e = ELEMENT_OF.get(datatype);
  if (e === undefined) throw new UnsupportedError(`datatype ${datatype} has no onnxruntime element type`);
  return e;
}

/** Strings FillStringTensor takes in one call: well under koffi's 2 MiB heap for synchronous calls. */
const STRING_BATCH_BYTES = 256 * 1024;

/** Zero bytes still need a valid pointer: onnxruntime refuses a null data pointer. */
const EMPTY = new Uint8Array(8);

/** A created input OrtValue and what it borrows (kept referenced until released). */
export interface InputValue {
  value: Handle;
  borrowed: unknown;
  /** A runner's cached value (small-values.ts): not released after the run. */
  cached?: boolean;
}

/** Shape as the int64 array the C API reads. */
function shapeOf(shape: readonly number[]): BigInt64Array {
  const s = new BigInt64Array(shape.length);
  for (let i = 0; i < shape.length; i++) s[i] = BigInt(shape[i]);
  return s;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * An OrtValue for one input. Fixed-size data is borrowed (see module doc); BYTES are copied by onnxruntime.
 * `memoryInfo` is the env's CPU memory info. Throws INVALID_ARG for data that does not fit its shape.
 */
export function createInput(t: Tensor, memoryInfo: Ptr, allocator: Ptr): InputValue {
  const api = ortApi();
  const out: Out = [null];
  const shape = shapeOf(t.shape);
  const count = t.shape.reduce((a, b) => a * b, 1);
  if (t.datatype === 'BYTES') {
    const elems = t.data as BytesData;
    if (!Array.isArray(elems) || elems.length !== count) {
      throw new InvalidArgError(`input '${t.name}': expected ${count} string elements, got ${String(elems.length)}`);
    }
    check(api.CreateTensorAsOrtValue(allocator, shape, t.shape.length, 8, out));
    const value = out[0] as Ptr;
    try {
      const strings = elems.map((e, i) => cString(t.name, e, i));
      // One call marshals every string through koffi's call heap (2 MiB); big tensors go element by element.
      if (elems.reduce((n, e) => n + e.byteLength + 1, 0) <= STRING_BATCH_BYTES) {
        if (count > 0) check(api.FillStringTensor(value, strings, count));
      } else {
        for (let i = 0; i < count; i++) check(api.FillStringTensorElement(value, strings[i], i));
      }
    } catch (err) {
      api.ReleaseValue(value);
      throw err;
    }
    return { value, borrowed: undefined };
  }
  const data = t.data as FixedTypedArray;
  const info = DATATYPES[t.datatype];
  if (Array.isArray(data) || data.length !== count) {
    throw new InvalidArgError(
      `input '${t.name}': shape [${t.shape.join(',')}] needs ${count} ${t.datatype} elements, got ${Array.isArray(data) ? 'strings' : data.length}`,
    );
  }
  const bytes = count * info.byteSize;
  const ptr = bytes === 0 ? EMPTY : data;
  return { value: tensorOver(memoryInfo, ptr, bytes, shape, elementOf(t.datatype)), borrowed: ptr };
}

/** One slot for the OrtValue* CreateTensorWithDataAsOrtValue writes (read at once: never across an await); lives as
 * long as the process. */
const created = new PointerArray(1);

/** An OrtValue over `bytes` of `data` (borrowed), as its address. */
function tensorOver(memoryInfo: Ptr, data: ArrayBufferView, bytes: number, shape: BigInt64Array, elem: number): number {
  check(ortApi().CreateTensorWithDataAsOrtValue(memoryInfo, data, bytes, shape, shape.length, elem, created.pointer));
  return created.get(0);
}

/** A preallocated output: the OrtValue onnxruntime writes into and the JavaScript tensor over the same memory. */
export interface OutputBuffer {
  value: Handle;
  tensor: Tensor;
}

/**
 * An output OrtValue over fresh JavaScript memory (preallocated output of `Run`): onnxruntime writes the result
 * there, so no copy is needed afterwards. The memory is not zero-filled (onnxruntime overwrites all of it).
 * The tensor keeps the memory alive; the caller keeps the tensor referenced until the OrtValue was released.
 */
export function createOutput(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  memoryInfo: Ptr,
  memory?: ArrayBuffer,
  offset = 0,
): OutputBuffer {
  const count = shape.reduce((a, b) => a * b, 1);
  const info = DATATYPES[datatype];
  const Ctor = info.array;
  if (Ctor === undefined) throw new InternalError(`output '${name}': ${datatype} cannot be preallocated`);
  const bytes = count * info.byteSize;
  // `memory` (prefaulted.ts, output-pool.ts): memory with `bytes` free at `offset`; the output is those bytes.
  const data =
    memory !== undefined && memory.byteLength >= offset + bytes && bytes > 0
      ? new Ctor(memory, offset, count)
      : overwrittenArray(datatype, count);
  const value = tensorOver(memoryInfo, bytes === 0 ? EMPTY : data, bytes, shapeOf(shape), elementOf(datatype));
  return { value, tensor: { name, datatype, shape: [...shape], data } };
}

/**
 * A BYTES element as the NUL-terminated UTF-8 string FillStringTensor copies. onnxruntime's string tensors hold
 * text: bytes that are not UTF-8, or a NUL (it would cut the element short), are refused.
 */
function cString(name: string, e: Uint8Array, i: number): string {
  if (e.includes(0)) {
    throw new InvalidArgError(
      `input '${name}': element ${i} contains a NUL byte, which onnxruntime string tensors cannot carry (it would be cut short)`,
    );
  }
  try {
    return utf8.decode(e);
  } catch (err) {
    throw new InvalidArgError(
      `input '${name}': element ${i} is not valid UTF-8; onnxruntime string tensors carry text only`,
      {
        cause: err,
      },
    );
  }
}

/** Reusable scratch for reading a tensor's type and shape on the JavaScript thread (never shared across awaits). */
const i32 = new Int32Array(1);
const u64 = new BigUint64Array(1);
let dims = new BigInt64Array(16);

/** Element type and shape of a tensor OrtValue. */
export function typeAndShape(value: Handle): { elementType: number; shape: number[] } {
  const api = ortApi();
  const out: Out = [null];
  check(api.GetTensorTypeAndShape(pointerOf(value), out));
  const info = out[0] as Ptr;
  try {
    check(api.GetTensorElementType(info, i32));
    check(api.GetDimensionsCount(info, u64));
    const rank = Number(u64[0]);
    if (dims.length < rank) dims = new BigInt64Array(rank);
    check(api.GetDimensions(info, dims, rank));
    const shape = new Array<number>(rank);
    for (let i = 0; i < rank; i++) shape[i] = Number(dims[i]);
    return { elementType: i32[0], shape };
  } finally {
    api.ReleaseTensorTypeAndShapeInfo(info);
  }
}

/**
 * A typed array for `count` elements that the caller overwrites entirely (an output onnxruntime or a device copy
 * fills): uninitialized memory of its own ArrayBuffer (transferable: never Buffer's pool). A zeroed array would
 * cost as much again as the copy that fills it (5.7 MB: 1.2 ms zeroed and filled vs 0.5–0.7 ms, measured here).
 */
export function overwrittenArray(datatype: DataType, count: number): FixedTypedArray {
  const info = DATATYPES[datatype];
  const Ctor = info.array;
  if (Ctor === undefined) throw new InternalError(`${datatype} has no fixed-size array`);
  const bytes = count * info.byteSize;
  return bytes === 0 ? new Ctor(0) : new Ctor(Buffer.allocUnsafeSlow(bytes).buffer, 0, count);
}

/** Copies an output OrtValue into a JavaScript-owned Tensor (one copy). The caller releases the OrtValue. */
export function readOutput(name: string, handle: Handle): Tensor {
  const api = ortApi();
  const value = pointerOf(handle);
  const { elementType, shape } = typeAndShape(value);
  const datatype = dataTypeOfElement(elementType);
  if (datatype === undefined) {
    throw new UnsupportedError(
      `output '${name}' has ONNX type ${elementTypeName(elementType)}, which Nereid does not support`,
    );
  }
  const count = shape.reduce((a, b) => a * b, 1);
  if (datatype === 'BYTES') return { name, datatype, shape, data: readStrings(value, count) };
  const data = overwrittenArray(datatype, count);
  if (count > 0) {
    const out: Out = [null];
    check(api.GetTensorMutableData(value, out));
    if (out[0] === null) throw new InternalError(`output '${name}': onnxruntime returned no data`);
    new Uint8Array(data.buffer).set(new Uint8Array(koffi.view(out[0], data.byteLength)));
  }
  return { name, datatype, shape, data };
}

/** A string tensor's elements: one copy of all bytes, elements are views into it. */
function readStrings(value: Ptr, count: number): BytesData {
  const api = ortApi();
  check(api.GetStringTensorDataLength(value, u64));
  const total = Number(u64[0]);
  const content = new Uint8Array(Math.max(total, 1));
  const offsets = new BigUint64Array(Math.max(count, 1));
  if (count > 0) check(api.GetStringTensorContent(value, content, total, offsets, count));
  const elems: BytesData = new Array(count);
  for (let i = 0; i < count; i++) {
    const start = Number(offsets[i]);
    const end = i + 1 < count ? Number(offsets[i + 1]) : total;
    elems[i] = content.subarray(start, end);
  }
  return elems;
}
