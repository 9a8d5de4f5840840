import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import type { DataType } from '../../core/datatypes.js';
import type { Tensor, TensorData } from '../../core/tensor.js';
import type { TensorSignature } from '../contract.js';

/**
 * Overridable initializers: graph inputs of an ONNX model that also have an initializer (a default value). Triton
 * treats them as optional inputs. onnxruntime-node neither lists them among a session's inputs nor uses a feed
 * for them (it silently keeps the initializer), so an input the config declares is made a real graph input: its
 * initializer is cut out of the model bytes (the session is created from the edited bytes), and a request that
 * omits it is fed the initializer's value. Only what the config declares is cut: old exporters list every weight
 * as a graph input, and feeding those on every run would be slow.
 *
 * A minimal protobuf walk (no copy of the weights) over ModelProto.graph (7) → GraphProto.initializer (5,
 * TensorProto) and GraphProto.input (11, ValueInfoProto); TensorProto: dims 1, data_type 2, float_data 4,
 * int32_data 5, string_data 6, int64_data 7, name 8, raw_data 9, double_data 10, uint64_data 11, data_location 14.
 */

/** An overridable input: its signature (the initializer's type and dims) and its default value. */
export interface Overridable {
  readonly signature: TensorSignature;
  readonly initial: Tensor;
}

const ONNX_TYPES: Readonly<Record<number, DataType>> = {
  1: 'FP32',
  2: 'UINT8',
  3: 'INT8',
  4: 'UINT16',
  5: 'INT16',
  6: 'INT32',
  7: 'INT64',
  8: 'BYTES',
  9: 'BOOL',
  10: 'FP16',
  11: 'FP64',
  12: 'UINT32',
  13: 'UINT64',
  16: 'BF16',
};

interface Field {
  no: number;
  wire: number;
  /** Where the field's tag starts and where the field ends. */
  start: number;
  end: number;
  /** Varint value (wire 0), or the payload's start (wire 2). */
  value: number;
}

function varint(buf: Uint8Array, at: number): [number, number] {
  let v = 0;
  let mul = 1;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const b = buf[i];
    v += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [v, i + 1];
    mul *= 128;
  }
  throw new InvalidArgError('the ONNX file is not a valid protobuf (truncated varint)');
}

function* fields(buf: Uint8Array, from: number, to: number): Generator<Field> {
  let at = from;
  while (at < to) {
    const start = at;
    const [tag, next] = varint(buf, at);
    at = next;
    const no = Math.floor(tag / 8);
    const wire = tag & 7;
    let value = 0;
    if (wire === 0) [value, at] = varint(buf, at);
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const [len, payload] = varint(buf, at);
      value = payload;
      at = payload + len;
    } else throw new InvalidArgError(`the ONNX file is not a valid protobuf (wire type ${wire})`);
    if (at > to) throw new InvalidArgError('the ONNX file is not a valid protobuf (field past its message)');
    yield { no, wire, start, end: at, value };
  }
}

const utf8 = new TextDecoder();

/** A copy of bytes [from, to) in a buffer of its own (a Node Buffer's slice() would be a view into a pool). */
function copyOf(buf: Uint8Array, from: number, to: number): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(to - from);
  out.set(buf.subarray(from, to));
  return out;
}
const text = (buf: Uint8Array, f: Field): string => utf8.decode(buf.subarray(f.value, f.end));

/** Values of a repeated scalar field: packed (wire 2) or one per field (wire 0/1/5). */
function scalars(buf: Uint8Array, all: Field[], no: number, kind: 'varint' | 'f32' | 'f64'): number[] {
  const out: number[] = [];
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  for (const f of all) {
    if (f.no !== no) continue;
    if (f.wire === 2) {
      for (let at = f.value; at < f.end;) {
        if (kind === 'varint') {
          const [v, next] = varint(buf, at);
          out.push(v);
          at = next;
        } else {
          out.push(kind === 'f32' ? dv.getFloat32(at, true) : dv.getFloat64(at, true));
          at += kind === 'f32' ? 4 : 8;
        }
      }
    } else if (kind === 'varint') out.push(f.value);
    else out.push(kind === 'f32' ? dv.getFloat32(f.end - 4, true) : dv.getFloat64(f.end - 8, true));
  }
  return out;
}

/** Signed varints of field `no` (int32_data, int64_data), read exactly: negative ones take ten bytes. */
function signed(buf: Uint8Array, all: Field[], no: number): bigint[] {
  const out: bigint[] = [];
  const read = (at: number): [bigint, number] => {
    let v = 0n;
    let shift = 0n;
    for (let i = at; i < buf.length; i++) {
      v |= BigInt(buf[i] & 0x7f) << shift;
      shift += 7n;
      if ((buf[i] & 0x80) === 0) return [BigInt.asIntN(64, v), i + 1];
    }
    throw new InvalidArgError('the ONNX file is not a valid protobuf (truncated varint)');
  };
  for (const f of all) {
    if (f.no !== no) continue;
    if (f.wire === 2) for (let at = f.value; at < f.end;) [out[out.length], at] = read(at);
    else out.push(read(varint(buf, f.start)[1])[0]);
  }
  return out;
}

function tensorOf(buf: Uint8Array, tensor: Field, modelName: string): Overridable {
  const all = [...fields(buf, tensor.value, tensor.end)];
  const name = text(buf, all.find((f) => f.no === 8) as Field);
  const elem = all.find((f) => f.no === 2)?.value ?? 0;
  const datatype = ONNX_TYPES[elem];
  if (datatype === undefined) {
    throw new UnsupportedError(
      `model '${modelName}': initializer '${name}' has ONNX type ${elem}, which Nereid cannot feed`,
    );
  }
  if (all.some((f) => f.no === 14 && f.value === 1)) {
    throw new UnsupportedError(
      `model '${modelName}': initializer '${name}' keeps its data in an external file; Nereid can make it an input only when the data is inside model.onnx`,
    );
  }
  const dims = scalars(buf, all, 1, 'varint');
  const count = dims.reduce((a, b) => a * b, 1);
  const raw = all.find((f) => f.no === 9);
  let data: TensorData;
  if (datatype === 'BYTES') {
    data = all.filter((f) => f.no === 6).map((f) => copyOf(buf, f.value, f.end));
  } else if (raw !== undefined) {
    const bytes = copyOf(buf, raw.value, raw.end);
    const Ctor = {
      FP32: Float32Array,
      UINT8: Uint8Array,
      INT8: Int8Array,
      UINT16: Uint16Array,
      INT16: Int16Array,
      INT32: Int32Array,
      INT64: BigInt64Array,
      BOOL: Uint8Array,
      FP16: Uint16Array,
      FP64: Float64Array,
      UINT32: Uint32Array,
      UINT64: BigUint64Array,
      BF16: Uint16Array,
    }[datatype];
    data = new Ctor(bytes.buffer, 0, bytes.byteLength / Ctor.BYTES_PER_ELEMENT);
  } else if (datatype === 'FP32') data = Float32Array.from(scalars(buf, all, 4, 'f32'));
  else if (datatype === 'FP64') data = Float64Array.from(scalars(buf, all, 10, 'f64'));
  else if (datatype === 'INT64') data = BigInt64Array.from(signed(buf, all, 7));
  else if (datatype === 'INT32') data = Int32Array.from(signed(buf, all, 5), (v) => Number(BigInt.asIntN(32, v)));
  else {
    throw new UnsupportedError(
      `model '${modelName}': initializer '${name}' (${datatype}) stores its values in a form Nereid cannot read; save it as raw_data`,
    );
  }
  if (data.length !== count) {
    throw new InvalidArgError(
      `model '${modelName}': initializer '${name}' has ${data.length} values for dims [${dims.join(',')}]`,
    );
  }
  return {
    signature: { name, datatype, dims },
    initial: { name, datatype, shape: dims, data },
  };
}

function graphOf(buf: Uint8Array): Field {
  let graph: Field | undefined;
  for (const f of fields(buf, 0, buf.length)) if (f.no === 7 && f.wire === 2) graph = f;
  if (graph === undefined) throw new InvalidArgError('the ONNX file has no graph');
  return graph;
}

/** Graph input names that also have an initializer, with their initializer fields. */
function overridableFields(buf: Uint8Array, graph: Field): Map<string, Field> {
  const inputs = graphInputs(buf, graph);
  const inits = new Map<string, Field>();
  for (const f of fields(buf, graph.value, graph.end)) {
    if (f.no === 5 && f.wire === 2) {
      const n = [...fields(buf, f.value, f.end)].find((x) => x.no === 8);
      if (n) inits.set(text(buf, n), f);
    }
  }
  for (const name of [...inits.keys()]) if (!inputs.has(name)) inits.delete(name);
  return inits;
}

/** GraphProto.input (11): ValueInfoProto fields by name (1). */
function graphInputs(buf: Uint8Array, graph: Field): Map<string, Field> {
  const inputs = new Map<string, Field>();
  for (const f of fields(buf, graph.value, graph.end)) {
    if (f.no !== 11 || f.wire !== 2) continue;
    const n = [...fields(buf, f.value, f.end)].find((x) => x.no === 1);
    if (n) inputs.set(text(buf, n), f);
  }
  return inputs;
}

/** The one sub-message `no` of [from, to), or undefined. */
const child = (buf: Uint8Array, from: number, to: number, no: number): Field | undefined =>
  [...fields(buf, from, to)].find((x) => x.no === no && x.wire === 2);

/**
 * A graph input's declared tensor type: ValueInfoProto.type (2) → TypeProto.tensor_type (1) → elem_type (1) and
 * shape (2) → TensorShapeProto.dim (1) → dim_value (1) or dim_param (2). A symbolic or unknown dim is -1, as
 * onnxruntime reports it; a missing elem_type or shape is undefined (the initializer's then stands).
 */
function declaredType(buf: Uint8Array, input: Field): { elem?: number; dims?: number[] } {
  const type = child(buf, input.value, input.end, 2);
  const tensor = type && child(buf, type.value, type.end, 1);
  if (tensor === undefined) return {};
  const parts = [...fields(buf, tensor.value, tensor.end)];
  const elem = parts.find((x) => x.no === 1 && x.wire === 0)?.value;
  const shape = parts.find((x) => x.no === 2 && x.wire === 2);
  const dims = shape
    ? [...fields(buf, shape.value, shape.end)]
        .filter((d) => d.no === 1 && d.wire === 2)
        .map((d) => [...fields(buf, d.value, d.end)].find((x) => x.no === 1 && x.wire === 0)?.value ?? -1)
    : undefined;
  return { elem, dims };
}

/**
 * The signatures of the model's overridable initializers (graph inputs with a default): the graph input's declared
 * type, as onnxruntime reports it (an input declared ["d1"] with a [1] initializer is [-1]); the initializer's
 * type and dims only where the graph input declares none.
 */
export function overridableSignatures(buf: Uint8Array, modelName: string): TensorSignature[] {
  const graph = graphOf(buf);
  const inputs = graphInputs(buf, graph);
  return [...overridableFields(buf, graph)].map(([name, f]) => {
    const init = tensorOf(buf, f, modelName).signature;
    const declared = declaredType(buf, inputs.get(name) as Field);
    const datatype = declared.elem === undefined ? undefined : ONNX_TYPES[declared.elem];
    return { name, datatype: datatype ?? init.datatype, dims: declared.dims ?? init.dims };
  });
}

function encodeVarint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

/**
 * The model bytes without the initializers of `names` (so onnxruntime sees them as plain inputs), and their
 * default values. Names that are not overridable initializers are left alone.
 */
export function releaseInitializers(
  buf: Uint8Array,
  names: ReadonlySet<string>,
  modelName: string,
): { model: Uint8Array; defaults: Overridable[] } {
  const graph = graphOf(buf);
  const cut = [...overridableFields(buf, graph)].filter(([n]) => names.has(n)).map(([, f]) => f);
  if (cut.length === 0) return { model: buf, defaults: [] };
  // The edited model is handed to onnxruntime as bytes: external data files could not be found from there.
  for (const f of fields(buf, graph.value, graph.end)) {
    if (f.no === 5 && f.wire === 2 && [...fields(buf, f.value, f.end)].some((x) => x.no === 14 && x.value === 1)) {
      throw new UnsupportedError(
        `model '${modelName}' keeps initializers in external data files; Nereid can make initializers inputs only for models whose data is inside model.onnx`,
      );
    }
  }
  const defaults = cut.map((f) => tensorOf(buf, f, modelName));
  cut.sort((a, b) => a.start - b.start);
  const parts: Uint8Array[] = [];
  let at = graph.value;
  for (const f of cut) {
    parts.push(buf.subarray(at, f.start));
    at = f.end;
  }
  parts.push(buf.subarray(at, graph.end));
  const length = parts.reduce((n, p) => n + p.length, 0);
  const header = Uint8Array.from([0x3a, ...encodeVarint(length)]);
  const out = new Uint8Array(graph.start + header.length + length + (buf.length - graph.end));
  out.set(buf.subarray(0, graph.start), 0);
  let w = graph.start;
  out.set(header, w);
  w += header.length;
  for (const p of parts) {
    out.set(p, w);
    w += p.length;
  }
  out.set(buf.subarray(graph.end), w);
  return { model: out, defaults };
}
