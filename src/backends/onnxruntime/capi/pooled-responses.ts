import type { FixedTypedArray } from '../../../core/datatypes.js';
import { SharedLease } from '../../../core/lease.js';
import type { Tensor } from '../../../core/tensor.js';
import type { EngineRequest, EngineResponse } from '../../contract.js';
import type { OutputPool, PooledBuffer } from './output-pool.js';
import { overwrittenArray } from './tensors.js';

/**
 * A batch's responses whose outputs view one pooled buffer (output-pool.ts): a request with `viewsOk` keeps the
 * views under a share of one lease, every other request gets its outputs copied out (its bytes its own, as before
 * pools). The buffer goes back to the pool when the last share is released — at once when no request views it.
 * Outputs not in the buffer (the client's device memory, fresh memory) are left as they are.
 */
export function lendPooled(
  requests: readonly EngineRequest[],
  responses: EngineResponse[],
  pooled: PooledBuffer | undefined,
  pool: OutputPool | undefined,
): EngineResponse[] {
  if (pooled === undefined || pool === undefined) return responses;
  const memory = pooled.view.buffer;
  try {
    const viewers = requests.filter((r) => r.viewsOk === true).length;
    const out = responses.map((res, i): EngineResponse => {
      if (requests[i].viewsOk === true) return res;
      return {
        ...res,
        outputs: res.outputs.map((t) => ((t.data as ArrayBufferView).buffer === memory ? ownCopy(t) : t)),
      };
    });
    // Copies made: the buffer is the viewers' now (given back here when there is none).
    const lease = new SharedLease(viewers, () => pool.give(pooled));
    return out.map((res, i) => (requests[i].viewsOk === true ? { ...res, lease: lease.share() } : res));
  } catch (err) {
    pool.give(pooled);
    throw err;
  }
}

/** The tensor with its bytes copied into memory of its own. */
function ownCopy(t: Tensor): Tensor {
  const src = t.data as FixedTypedArray;
  const data = overwrittenArray(t.datatype, src.length);
  data.set(src as never);
  return { ...t, data };
}
