import type { FixedTypedArray } from '../../core/datatypes.js';
import type { InferResponse } from '../../core/inference.js';
import { encodeBytes, fixedBytes } from '../../core/tensor.js';
import type { InferOutputTensorMsg, ModelInferResponseMsg } from './messages.js';
import { toParameterMap } from './parameters.js';

/**
 * InferResponse → ModelInferResponse. Every output goes in `raw_output_contents`, as Triton sends it
 * (tritonclient reads only that field); fixed-size data is a view of the backend's output allocation,
 * BYTES is encoded with its length prefixes.
 */
export function encodeModelInferResponse(resp: InferResponse): ModelInferResponseMsg {
  const outputs: InferOutputTensorMsg[] = [];
  const raw: Uint8Array[] = [];
  for (const t of resp.outputs) {
    outputs.push({ name: t.name, datatype: t.datatype, shape: t.shape });
    raw.push(Array.isArray(t.data) ? encodeBytes(t.data) : fixedBytes(t.data as FixedTypedArray));
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
