import type { JoinMemory } from '../../batching.js';
import type { EngineRequest } from '../../contract.js';
import type { OutputPool } from './output-pool.js';

/** Offsets in a staging buffer: 64 bytes, as for outputs. */
const ALIGN = 64;

/**
 * Page-locked staging for a batch's joined inputs (issue 31 item 3): a batch of several requests is copied into one
 * tensor per input anyway (batching.ts `joinInputs`); on a GPU instance with an output pool that copy lands in a
 * pooled page-locked buffer, so onnxruntime's host-to-device copy is one DMA instead of the driver's staging of
 * pageable memory. Never waits: with no buffer free now the join uses fresh memory. `give` returns the buffer once
 * the run is over (the run's input values borrow it until then). A batch of one request is not staged: its input is
 * the request's own memory, which a copy here would only add to.
 */
export function stageInputs(
  requests: readonly EngineRequest[],
  pool: OutputPool | undefined,
): { memory: JoinMemory; give: () => void } | undefined {
  if (pool === undefined || requests.length < 2) return undefined;
  let total = 0;
  for (const r of requests) {
    for (const t of r.inputs) {
      if (Array.isArray(t.data)) return undefined; // BYTES inputs are joined as element lists, not bytes
      total += (t.data as ArrayBufferView).byteLength + ALIGN;
    }
  }
  const buffer = pool.tryTake(total);
  if (buffer === undefined) return undefined;
  let at = 0;
  let given = false;
  return {
    memory: (bytes) => {
      if (at + bytes > buffer.view.byteLength) return undefined;
      const place = { buffer: buffer.view.buffer as ArrayBuffer, byteOffset: buffer.view.byteOffset + at };
      at += Math.ceil(bytes / ALIGN) * ALIGN;
      return place;
    },
    give: () => {
      if (given) return;
      given = true;
      pool.give(buffer);
    },
  };
}
