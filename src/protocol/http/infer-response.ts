import type { FixedTypedArray } from '../../core/datatypes.js';
import type { InferResponse, Parameters } from '../../core/inference.js';
import { encodeBytes, fixedBytes } from '../../core/tensor.js';
import { tensorDataToJson } from '../kserve/json-tensor.js';
import type { OutputPlan } from './infer-request.js';

/** An encoded infer response: the JSON header, then the binary blobs in output order (views, not copies). */
export interface EncodedInfer {
  header: Buffer;
  blobs: Uint8Array[];
  /** Set when blobs follow: the `Inference-Header-Content-Length` value. */
  headerLength?: number;
}

/** JSON text of parameters; written by hand so bigint values print exactly. */
export function parametersToJson(params: Parameters): string {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(params)) {
    parts.push(`${JSON.stringify(k)}:${typeof v === 'bigint' ? v.toString() : JSON.stringify(v)}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * Encodes an InferResponse as KServe JSON with Triton's binary extension: an output is binary when the plan says so
 * (per-output `binary_data`, else the request default), its blob appended in output order and its JSON entry carrying
 * `parameters.binary_data_size`. Fixed-size blobs are views of the backend's output allocation.
 */
export function encodeInferResponse(resp: InferResponse, plan: OutputPlan): EncodedInfer {
  const blobs: Uint8Array[] = [];
  const outputs: string[] = [];
  for (const t of resp.outputs) {
    const head = `{"name":${JSON.stringify(t.name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}]`;
    if (plan.binary.get(t.name) ?? plan.binaryDefault) {
      const blob = Array.isArray(t.data) ? encodeBytes(t.data) : fixedBytes(t.data as FixedTypedArray);
      blobs.push(blob);
      outputs.push(`${head},"parameters":{"binary_data_size":${blob.byteLength}}}`);
    } else {
      outputs.push(`${head},"data":${tensorDataToJson(t)}}`);
    }
  }
  let json = `{"model_name":${JSON.stringify(resp.model)},"model_version":${JSON.stringify(resp.version)}`;
  if (resp.id !== undefined && resp.id !== '') json += `,"id":${JSON.stringify(resp.id)}`;
  if (resp.parameters !== undefined && Object.keys(resp.parameters).length > 0) {
    json += `,"parameters":${parametersToJson(resp.parameters)}`;
  }
  json += `,"outputs":[${outputs.join(',')}]}`;
  const header = Buffer.from(json, 'utf8');
  return blobs.length > 0 ? { header, blobs, headerLength: header.byteLength } : { header, blobs };
}
