import type { FixedTypedArray } from '../../core/datatypes.js';
import type { InferResponse, Parameters } from '../../core/inference.js';
import { encodeBytes, fixedBytes } from '../../core/tensor.js';
import {
  appendJsonData,
  binaryByteSize,
  DEFAULT_MAX_RESPONSE_BYTES,
  estimateJsonByteSize,
  minJsonByteSize,
  ResponseBudget,
  responseTooLarge,
} from '../kserve/response-size.js';
import type { OutputPlan } from './infer-request.js';

/** An encoded infer response: the JSON header (in pieces), then the binary blobs in output order (views, not copies). */
export interface EncodedInfer {
  header: Buffer[];
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
 * `parameters.binary_data_size`. Fixed-size blobs are views of the backend's output allocation. An output written to
 * the client's shared memory carries no data here.
 *
 * The response is refused (400) before it is built when it cannot fit `maxBytes` (`--max-response-bytes`): against a
 * lower bound (exact for binary outputs) and a sampled estimate of the JSON text (refused past 110 % of the limit),
 * then exactly as JSON text is produced, chunk by chunk.
 */
export async function encodeInferResponse(
  resp: InferResponse,
  plan: OutputPlan,
  maxBytes = DEFAULT_MAX_RESPONSE_BYTES,
): Promise<EncodedInfer> {
  const binary = resp.outputs.map(
    (t) => t.sharedMemory === undefined && (plan.binary.get(t.name) ?? plan.binaryDefault),
  );
  let lowerBound = 0;
  let estimate = 0;
  resp.outputs.forEach((t, i) => {
    if (t.sharedMemory !== undefined) return;
    const exact = binary[i] ? binaryByteSize(t) : undefined;
    lowerBound += exact ?? minJsonByteSize(t);
    estimate += exact ?? estimateJsonByteSize(t);
  });
  if (lowerBound > maxBytes) throw responseTooLarge(lowerBound, maxBytes, 'at least');
  if (estimate > maxBytes * 1.1) throw responseTooLarge(estimate, maxBytes, 'about');

  const budget = new ResponseBudget(maxBytes);
  const header: Buffer[] = [];
  // The JSON text is gathered as one string and made a Buffer once (before a JSON data array, and at the end): one
  // Buffer per piece was 4 % of a `simple` request's main-thread time, profiled. The pieces here are names, shapes
  // and sizes, bounded by the request; the data arrays, which are not, are counted chunk by chunk as before.
  let pending = '';
  const text = (s: string): void => {
    pending += s;
  };
  const flush = (): void => {
    if (pending === '') return;
    const b = Buffer.from(pending, 'utf8');
    budget.take(b.byteLength);
    header.push(b);
    pending = '';
  };
  const blobs: Uint8Array[] = [];
  text(`{"model_name":${JSON.stringify(resp.model)},"model_version":${JSON.stringify(resp.version)}`);
  if (resp.id !== undefined && resp.id !== '') text(`,"id":${JSON.stringify(resp.id)}`);
  if (resp.parameters !== undefined && Object.keys(resp.parameters).length > 0) {
    text(`,"parameters":${parametersToJson(resp.parameters)}`);
  }
  text(`,"outputs":[`);
  for (const [i, t] of resp.outputs.entries()) {
    text(
      `${i > 0 ? ',' : ''}{"name":${JSON.stringify(t.name)},"datatype":"${t.datatype}","shape":[${t.shape.join(',')}]`,
    );
    if (t.sharedMemory !== undefined) {
      // Triton's answer for an output in shared memory: metadata only; the data is in the client's region.
      text('}');
    } else if (binary[i]) {
      budget.take(binaryByteSize(t));
      const blob = Array.isArray(t.data) ? encodeBytes(t.data) : fixedBytes(t.data as FixedTypedArray);
      blobs.push(blob);
      text(`,"parameters":{"binary_data_size":${blob.byteLength}}}`);
    } else {
      text(',"data":');
      flush();
      await appendJsonData(t, budget, header);
      text('}');
    }
  }
  text(']}');
  flush();
  if (blobs.length === 0) return { header, blobs };
  let headerLength = 0;
  for (const b of header) headerLength += b.byteLength;
  return { header, blobs, headerLength };
}
