import { isDataType } from '../core/datatypes.js';
import { InternalError } from '../core/errors.js';
import { InferResult } from './result.js';
import { fromJsonData, fromWireBytes, toJsonData, wireBytes, type WireInput } from './tensors.js';
import type { ClientParameters, OutputTensor, RequestedOutput } from './types.js';

/**
 * KServe v2 infer bodies with Triton's binary tensor data extension, in and out. Browser-safe: only TextEncoder,
 * TextDecoder and Uint8Array. The JSON header is written by hand so bigint parameters and INT64 data print exactly.
 */

/** What the HTTP client sends: the body and the headers that describe it. */
export interface EncodedRequest {
  // ArrayBuffer-backed (not SharedArrayBuffer): the DOM's BodyInit accepts only that.
  body: Uint8Array<ArrayBuffer>;
  headers: Record<string, string>;
}

/** How the request asks for its outputs. */
export interface RequestShape {
  outputs?: RequestedOutput[];
  id?: string;
  parameters?: ClientParameters;
  binary: boolean;
}

const utf8 = new TextEncoder();

/** JSON text of parameters; bigint values print as exact digits. */
export function parametersJson(params: ClientParameters): string {
  const parts = Object.entries(params).map(
    ([k, v]) => `${JSON.stringify(k)}:${typeof v === 'bigint' ? v.toString() : JSON.stringify(v)}`,
  );
  return `{${parts.join(',')}}`;
}

/**
 * Encodes an infer request. Binary: every input is a blob after the JSON header and outputs are asked for as
 * binary. JSON: data inline, except FP16/BF16 inputs, which go as blobs anyway because Triton refuses them in JSON.
 */
export function encodeInferRequest(inputs: readonly WireInput[], req: RequestShape): EncodedRequest {
  const blobs: Uint8Array[] = [];
  const inputJson = inputs.map((t) => {
    const head = `{"name":${JSON.stringify(t.name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}]`;
    if (req.binary || t.datatype === 'FP16' || t.datatype === 'BF16') {
      const blob = wireBytes(t.data);
      blobs.push(blob);
      return `${head},"parameters":{"binary_data_size":${blob.byteLength}}}`;
    }
    return `${head},"data":${toJsonData(t)}}`;
  });
  const params: ClientParameters = { ...req.parameters };
  let json = '{';
  if (req.id !== undefined) json += `"id":${JSON.stringify(req.id)},`;
  if (req.outputs === undefined) {
    if (req.binary) params.binary_data_output = true;
  } else {
    const outs = req.outputs.map((o) => {
      const p: ClientParameters = { ...o.parameters };
      if (req.binary) p.binary_data = true;
      if (o.classCount !== undefined && o.classCount > 0) p.classification = o.classCount;
      return `{"name":${JSON.stringify(o.name)},"parameters":${parametersJson(p)}}`;
    });
    json += `"outputs":[${outs.join(',')}],`;
  }
  if (Object.keys(params).length > 0) json += `"parameters":${parametersJson(params)},`;
  json += `"inputs":[${inputJson.join(',')}]}`;
  const header = utf8.encode(json);
  if (blobs.length === 0) return { body: header, headers: { 'Content-Type': 'application/json' } };
  const body = new Uint8Array(header.byteLength + blobs.reduce((n, b) => n + b.byteLength, 0));
  body.set(header, 0);
  let off = header.byteLength;
  for (const b of blobs) {
    body.set(b, off);
    off += b.byteLength;
  }
  return {
    body,
    headers: {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(header.byteLength),
    },
  };
}

interface WireOutput {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: ClientParameters & { binary_data_size?: number };
  data?: unknown;
}
interface WireResponse {
  model_name: string;
  model_version: string;
  id?: string;
  parameters?: ClientParameters;
  outputs?: WireOutput[];
}

// Whether JSON.parse gives revivers the literal's text (Node >= 21: TC39 "JSON.parse source text access").
const HAS_JSON_SOURCE = ((): boolean => {
  let ok = false;
  JSON.parse('1', ((_k: string, v: unknown, ctx?: { source?: string }) => {
    ok = typeof ctx?.source === 'string';
    return v;
  }) as (k: string, v: unknown) => unknown);
  return ok;
})();

/**
 * JSON.parse keeping integer literals beyond 2^53 exact, as bigint (INT64/UINT64 data up to 2^63-1 and 2^64-1),
 * where the runtime shows revivers the literal's text; the reviver runs only when the text holds a 16-digit run.
 */
function parseExactJson(text: string): unknown {
  if (!HAS_JSON_SOURCE || !/\d{16}/.test(text)) return JSON.parse(text);
  const reviver = (_k: string, v: unknown, ctx?: { source?: string }): unknown =>
    typeof v === 'number' && !Number.isSafeInteger(v) && ctx?.source !== undefined && /^-?\d+$/.test(ctx.source)
      ? BigInt(ctx.source)
      : v;
  return JSON.parse(text, reviver as (k: string, v: unknown) => unknown);
}

/**
 * Decodes an infer response body. `headerLength` is the `Inference-Header-Content-Length` value (undefined: the
 * whole body is JSON); blobs follow the header in output order, each `binary_data_size` long.
 */
export function decodeInferResponse(body: Uint8Array, headerLength: number | undefined): InferResult {
  const n = headerLength ?? body.byteLength;
  if (!Number.isSafeInteger(n) || n < 0 || n > body.byteLength) {
    throw new InternalError(`bad Inference-Header-Content-Length ${headerLength} for a ${body.byteLength}-byte body`);
  }
  let wire: WireResponse;
  try {
    wire = parseExactJson(new TextDecoder().decode(body.subarray(0, n))) as WireResponse;
  } catch (err) {
    throw new InternalError(`the server's infer response is not JSON: ${(err as Error).message}`, { cause: err });
  }
  let off = n;
  const outputs: OutputTensor[] = (wire.outputs ?? []).map((o) => {
    if (!isDataType(o.datatype)) throw new InternalError(`output '${o.name}': unknown datatype '${o.datatype}'`);
    const { binary_data_size: size, ...parameters } = o.parameters ?? {};
    let data: OutputTensor['data'];
    if (size !== undefined) {
      if (off + size > body.byteLength) {
        throw new InternalError(`output '${o.name}': binary_data_size ${size} runs past the end of the body`);
      }
      data = fromWireBytes(o.name, o.datatype, o.shape, body.subarray(off, off + size));
      off += size;
    } else {
      data = fromJsonData(o.name, o.datatype, o.shape, o.data);
    }
    const out: OutputTensor = { name: o.name, datatype: o.datatype, shape: o.shape, data };
    if (Object.keys(parameters).length > 0) out.parameters = parameters;
    return out;
  });
  return new InferResult({
    model: wire.model_name,
    version: wire.model_version,
    id: wire.id,
    parameters: wire.parameters,
    outputs,
  });
}
