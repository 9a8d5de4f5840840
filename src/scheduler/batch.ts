import type { EngineRequest } from '../backends/contract.js';

/**
 * Which requests may share a batch (pure). Joining their inputs and splitting the outputs is the engine's
 * business (backends/batching.ts), since an engine may also take requests one by one.
 */

/**
 * True when `b` may join a batch started by `a`: same inputs with equal non-batch dims (Triton's
 * RequiredEqualInputs), except inputs declared `allow_ragged_batch`, whose shapes may differ; neither has device
 * tensors.
 */
export function canMerge(a: EngineRequest, b: EngineRequest, ragged: ReadonlySet<string>): boolean {
  // A request with tensors in device memory runs alone: joining it with others would need a device-side gather
  // (Triton copies into one contiguous buffer); alone, the engine reads and writes the client's buffers in place.
  if (a.device !== undefined || b.device !== undefined) return false;
  if (a.inputs.length !== b.inputs.length) return false;
  for (const x of a.inputs) {
    const y = b.inputs.find((t) => t.name === x.name);
    if (!y || y.datatype !== x.datatype) return false;
    if (ragged.has(x.name)) continue;
    if (x.shape.length !== y.shape.length) return false;
    for (let i = 1; i < x.shape.length; i++) if (x.shape[i] !== y.shape[i]) return false;
  }
  return true;
}
