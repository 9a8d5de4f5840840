import { DATATYPES, type DataType } from '../../../core/datatypes.js';
import type { OutputPool, PooledBuffer } from './output-pool.js';
import type { PrefaultedBuffers } from './prefaulted.js';

/**
 * Where a run's host outputs of known shapes are written (preallocated outputs of `Run`). With an output pool
 * (KIND_GPU, output-pool.ts): all of them in ONE pooled page-locked buffer, each at a 64-byte aligned offset, so
 * onnxruntime's one device-to-host copy per output lands in page-locked memory and the batch has one output
 * allocation that its responses view. Otherwise (no pool, or a batch larger than the pool): prefaulted memory per
 * large output (prefaulted.ts), or fresh memory (undefined places).
 */

/** Outputs smaller than this go to plain fresh memory when there is no pool. */
const PREFAULT_MIN_BYTES = 1 << 20;

/** Offsets in a pooled buffer: 64 bytes, what any TypedArray and a CPU's cache line ask. */
const ALIGN = 64;

export interface HostPlace {
  memory: ArrayBuffer;
  offset: number;
}

export interface HostOutputMemory {
  /** Per output, in order: where it goes (undefined: fresh memory). */
  places: Array<HostPlace | undefined>;
  /** The pooled buffer they are in; the caller gives it back (OutputPool.give) once nothing reads them. */
  pooled?: PooledBuffer;
}

const bytesOf = (g: { datatype: DataType; shape: readonly number[] }): number =>
  g.shape.reduce((a, b) => a * b, 1) * DATATYPES[g.datatype].byteSize;

/** Memory for outputs of these shapes; waits for a pooled buffer when the pool is at its cap (see OutputPool.take). */
export async function hostOutputMemory(
  outputs: ReadonlyArray<{ datatype: DataType; shape: readonly number[] } | undefined>,
  opts: { pool?: OutputPool; prefaulted?: PrefaultedBuffers; signal?: AbortSignal },
): Promise<HostOutputMemory> {
  if (opts.pool !== undefined) {
    const offsets: number[] = [];
    let total = 0;
    for (const g of outputs) {
      offsets.push(total);
      if (g !== undefined) total += Math.ceil(bytesOf(g) / ALIGN) * ALIGN;
    }
    const taken = total === 0 ? undefined : opts.pool.take(total, opts.signal);
    const pooled = taken instanceof Promise ? await taken : taken;
    if (pooled !== undefined) {
      const { buffer, byteOffset } = pooled.view;
      return {
        places: outputs.map((g, i) =>
          g === undefined ? undefined : { memory: buffer as ArrayBuffer, offset: byteOffset + offsets[i] },
        ),
        pooled,
      };
    }
  }
  const p = opts.prefaulted;
  return {
    places: outputs.map((g) => {
      const bytes = g === undefined ? 0 : bytesOf(g);
      if (p === undefined || bytes < PREFAULT_MIN_BYTES) return undefined;
      const memory = p.take(2 ** Math.ceil(Math.log2(bytes)));
      return memory === undefined ? undefined : { memory, offset: 0 };
    }),
  };
}
