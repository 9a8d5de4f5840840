import { InvalidArgError } from '../../core/errors.js';

/**
 * Finds every external-data `location` an ONNX model names, by walking its protobuf wire format (no onnx.proto, no
 * decode of the weights: length-delimited fields that cannot hold tensors are skipped, so a 1 GB model costs one pass
 * over its framing). A load request that sends an ONNX file can point its tensors at any file the server can read
 * (`location: "../../../etc/shadow"`, onnx CVE-2022-25882 and successors); the caller checks each location stays in
 * the model folder before onnxruntime opens anything.
 *
 * Where external data can hide (field numbers of upstream onnx.proto): ModelProto.graph (7) and .functions (25);
 * GraphProto.node (1), .initializer (5), .sparse_initializer (15); FunctionProto.node (7); NodeProto.attribute (5);
 * AttributeProto.t (5), .g (6), .tensors (10), .graphs (11), .sparse_tensor (22), .sparse_tensors (23);
 * SparseTensorProto.values (1), .indices (2); TensorProto.external_data (13) of StringStringEntryProto {key 1, value 2}.
 */

type Kind = 'model' | 'graph' | 'function' | 'node' | 'attribute' | 'sparse' | 'tensor' | 'entry';

/** Per message kind: field number → the kind of the submessage it holds (only the fields that matter). */
const CHILDREN: Readonly<Record<Kind, Readonly<Record<number, Kind>>>> = {
  model: { 7: 'graph', 25: 'function' },
  graph: { 1: 'node', 5: 'tensor', 15: 'sparse' },
  function: { 7: 'node' },
  node: { 5: 'attribute' },
  attribute: { 5: 'tensor', 6: 'graph', 10: 'tensor', 11: 'graph', 22: 'sparse', 23: 'sparse' },
  sparse: { 1: 'tensor', 2: 'tensor' },
  tensor: { 13: 'entry' },
  entry: {},
};

/** Subgraphs nest (If/Loop bodies); a hostile file could nest them until the stack breaks. */
const MAX_DEPTH = 64;

class Reader {
  pos: number;
  constructor(
    readonly buf: Uint8Array,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  varint(): number {
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw malformed('a varint runs past its message');
      const b = this.buf[this.pos++];
      result += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) return result;
      scale *= 128;
    }
    throw malformed('a varint is longer than 10 bytes');
  }

  skip(wireType: number): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.advance(8);
        return;
      case 2:
        this.advance(this.varint());
        return;
      case 5:
        this.advance(4);
        return;
      default:
        throw malformed(`wire type ${wireType} is not used by ONNX`);
    }
  }

  advance(n: number): void {
    if (n > this.end - this.pos) throw malformed('a field runs past its message');
    this.pos += n;
  }
}

const malformed = (why: string): InvalidArgError => new InvalidArgError(`not a valid ONNX model: ${why}`);

const utf8 = new TextDecoder();

function walk(r: Reader, kind: Kind, depth: number, out: Set<string>): void {
  if (depth > MAX_DEPTH) throw malformed(`messages nest deeper than ${MAX_DEPTH} levels`);
  let key: string | undefined;
  let value: string | undefined;
  while (r.pos < r.end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wireType = tag % 8;
    const child = CHILDREN[kind][field];
    if (kind === 'entry' && wireType === 2 && (field === 1 || field === 2)) {
      const len = r.varint();
      const start = r.pos;
      r.advance(len);
      const text = utf8.decode(r.buf.subarray(start, start + len));
      if (field === 1) key = text;
      else value = text;
      continue;
    }
    if (child === undefined || wireType !== 2) {
      r.skip(wireType);
      continue;
    }
    const len = r.varint();
    const start = r.pos;
    r.advance(len);
    walk(new Reader(r.buf, start, start + len), child, depth + 1, out);
  }
  if (kind === 'entry' && key === 'location' && value !== undefined) out.add(value);
}

/** Every distinct external-data location named anywhere in the model (empty for a self-contained model). */
export function externalDataLocations(model: Uint8Array): string[] {
  const out = new Set<string>();
  walk(new Reader(model, 0, model.byteLength), 'model', 0, out);
  return [...out];
}
