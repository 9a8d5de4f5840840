import { CancelledError } from '../../../core/errors.js';

/**
 * Page-locked host memory for the outputs of KIND_GPU runs, made once and reused (issue 31). A run's outputs are
 * bound to one pooled buffer, so onnxruntime's single device-to-host copy lands in page-locked memory at the bus's
 * speed, with no page faults and nothing for the garbage collector. Used for runs with a response that may view
 * memory (`EngineRequest.viewsOk`: HTTP on the main thread), written to its socket straight from the buffer, which
 * comes back to the pool only when every response viewing it released its lease; the other responses of such a
 * batch get their bytes copied out (capi/pooled-responses.ts). A buffer is never handed out while it is lent, and a run's views cover only the
 * bytes that run wrote (onnxruntime fills every byte of every output), so no response sees another's bytes.
 *
 * Bounded: `maxBytes` of buffers in all, free and lent (`--pinned-memory-pool-byte-size`, per GPU). A take that does
 * not fit evicts free buffers of other sizes first; when the lent ones alone fill the pool, it WAITS (in order) for
 * one to come back — backpressure from slow readers, who hold their buffers until their socket took the bytes or
 * closed — and a waiting run is cancelled with its request. A batch larger than the whole pool is not pooled (the
 * run gets fresh memory, as without a pool).
 *
 * Sizes: powers of two from 64 KiB, so the batches of one model (whose sizes vary with the batch) share buffers.
 * Threading: one owner thread (the main thread: in-process instances of every model of the device).
 */

/** Where the pool's memory comes from: cudaMallocHost / cudaFreeHost (src/native/cudart.ts), or a test double. */
export interface PinnedMemory {
  alloc(bytes: number): Uint8Array;
  free(view: Uint8Array): void;
}

export interface PooledBuffer {
  /** The whole buffer (its size class); a run uses its first bytes. */
  readonly view: Uint8Array;
}

export interface OutputPoolStats {
  /** Bytes of page-locked memory the pool holds (free and lent). */
  bytes: number;
  /** Of those, bytes lent to runs and responses now. */
  lentBytes: number;
  /** Takes that had to wait for a buffer to come back. */
  waits: number;
  /** Runs whose outputs were larger than the whole pool (fresh memory instead). */
  unpooled: number;
}

const MIN_CLASS = 64 * 1024;

interface Waiter {
  size: number;
  resolve: (b: PooledBuffer) => void;
  reject: (err: Error) => void;
  signal?: AbortSignal;
  onAbort: () => void;
}

export class OutputPool {
  readonly maxBytes: number;
  readonly #memory: PinnedMemory;
  readonly #free = new Map<number, Uint8Array[]>();
  readonly #lent = new Set<Uint8Array>();
  readonly #waiting: Waiter[] = [];
  #bytes = 0;
  #lentBytes = 0;
  #waits = 0;
  #unpooled = 0;
  #closed = false;
  /** Page-locked memory could not be had (cudaMallocHost failed): runs get fresh memory from then on. */
  #failed = false;

  constructor(memory: PinnedMemory, maxBytes: number) {
    this.#memory = memory;
    this.maxBytes = maxBytes;
  }

  /** The size class of a run of `bytes`. */
  static sizeFor(bytes: number): number {
    return Math.max(MIN_CLASS, 2 ** Math.ceil(Math.log2(Math.max(bytes, 1))));
  }

  stats(): OutputPoolStats {
    return { bytes: this.#bytes, lentBytes: this.#lentBytes, waits: this.#waits, unpooled: this.#unpooled };
  }

  /**
   * A buffer of at least `bytes` for one run: now when one is free or fits, else a promise of the next that comes
   * back (rejected with CANCELLED when `signal` aborts first). Undefined when the pool is closed or `bytes` is more
   * than the whole pool.
   */
  take(bytes: number, signal?: AbortSignal): PooledBuffer | Promise<PooledBuffer> | undefined {
    const size = OutputPool.sizeFor(bytes);
    if (this.#closed || this.#failed || size > this.maxBytes) {
      if (!this.#closed) this.#unpooled++;
      return undefined;
    }
    const now = this.#waiting.length === 0 ? this.#takeNow(size) : undefined;
    if (now !== undefined) return now;
    if (this.#failed || this.#lent.size === 0) {
      // Nothing will come back to wait for: no page-locked memory to be had.
      this.#unpooled++;
      return undefined;
    }
    if (signal?.aborted) return Promise.reject(new CancelledError('request was cancelled'));
    this.#waits++;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        size,
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.#waiting.indexOf(waiter);
          if (i >= 0) this.#waiting.splice(i, 1);
          reject(new CancelledError('request was cancelled while waiting for page-locked output memory'));
          // The ones behind it may fit now.
          if (i === 0) this.#admit();
        },
      };
      signal?.addEventListener('abort', waiter.onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /**
   * A buffer of at least `bytes` only if one can be had now, never waiting (input staging: a run without one just
   * copies from pageable memory). Counts nothing as unpooled.
   */
  tryTake(bytes: number): PooledBuffer | undefined {
    const size = OutputPool.sizeFor(bytes);
    if (this.#closed || this.#failed || size > this.maxBytes || this.#waiting.length > 0) return undefined;
    return this.#takeNow(size);
  }

  /** Gives a buffer back (after its last reader released it); the next waiter gets it or memory for its size. */
  give(buffer: PooledBuffer): void {
    const view = buffer.view;
    if (!this.#lent.delete(view)) return;
    this.#lentBytes -= view.byteLength;
    if (this.#closed) {
      this.#release(view);
      return;
    }
    const list = this.#free.get(view.byteLength) ?? [];
    list.push(view);
    this.#free.set(view.byteLength, list);
    this.#admit();
  }

  /** Serves waiters in order while memory for the first can be had. */
  #admit(): void {
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0];
      const b = this.#takeNow(next.size);
      if (b === undefined) return;
      this.#waiting.shift();
      next.signal?.removeEventListener('abort', next.onAbort);
      next.resolve(b);
    }
  }

  /** Frees the free buffers now and the lent ones as they come back; waiters are failed. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    for (const list of this.#free.values()) for (const v of list) this.#release(v);
    this.#free.clear();
    for (const w of this.#waiting.splice(0)) {
      w.signal?.removeEventListener('abort', w.onAbort);
      w.reject(new CancelledError('the output pool was closed'));
    }
  }

  #takeNow(size: number): PooledBuffer | undefined {
    const view = this.#free.get(size)?.pop() ?? this.#allocate(size);
    if (view === undefined) return undefined;
    this.#lent.add(view);
    this.#lentBytes += view.byteLength;
    return { view };
  }

  /** New memory of `size` within the cap, evicting free buffers of other sizes to make room; else undefined. */
  #allocate(size: number): Uint8Array | undefined {
    for (const [s, list] of this.#free) {
      while (this.#bytes + size > this.maxBytes && list.length > 0) this.#release(list.pop()!);
      if (list.length === 0) this.#free.delete(s);
    }
    if (this.#bytes + size > this.maxBytes) return undefined;
    let view: Uint8Array;
    try {
      view = this.#memory.alloc(size);
    } catch {
      this.#failed = true;
      return undefined;
    }
    this.#bytes += size;
    return view;
  }

  #release(view: Uint8Array): void {
    this.#bytes -= view.byteLength;
    this.#memory.free(view);
  }
}
