import type { FixedTypedArray } from '../../core/datatypes.js';
import type { InferResponse } from '../../core/inference.js';
import { encodeBytes, fixedBytes } from '../../core/tensor.js';
import type { InferOutputTensorMsg, ModelInferResponseMsg } from './messages.js';
import { toParameterMap } from './parameters.js';
import { binaryByteSize, DEFAULT_MAX_RESPONSE_BYTES, responseTooLarge } from '../kserve/response-size.js';

/** An empty raw content: what Triton puts in `raw_output_contents` for an output written to shared memory. */
const EMPTY = new Uint8Array(0);

/**
 * InferResponse → ModelInferResponse. Every output goes in `raw_output_contents`, as Triton sends it
 * (tritonclient reads only that field); fixed-size data is a view of the backend's output allocation,
 * BYTES is encoded with its length prefixes; an output in shared memory has an empty entry. A response whose raw
 * contents pass `maxBytes` (`--max-response-bytes`) is refused INVALID_ARGUMENT before any of it is encoded.
 */
export function encodeModelInferResponse(
  resp: InferResponse,
  maxBytes = DEFAULT_MAX_RESPONSE_BYTES,
): ModelInferResponseMsg {
  let size = 0;
  for (const t of resp.outputs) if (t.sharedMemory === undefined) size += binaryByteSize(t);
  if (size > maxBytes) throw responseTooLarge(size, maxBytes, 'exactly');
  const outputs: InferOutputTensorMsg[] = [];
  const raw: Uint8Array[] = [];
  for (const t of resp.outputs) {
    outputs.push({ name: t.name, datatype: t.datatype, shape: t.shape });
    if (t.sharedMemory !== undefined) raw.push(EMPTY);
    else raw.push(Array.isArray(t.data) ? encodeBytes(t.data) : fixedBytes(t.data as FixedTypedArray));
  }
  const msg: ModelInferResponseMsg = {
    model_name: resp.model,
    model_version: resp.version,
    id: resp.id ?? '',
    outputs,
    raw_output_contents: raw,
  };
  const params = toParameterMap(resp.parameters);
  if (params) msg.parameters = params;
  return msg;
}
