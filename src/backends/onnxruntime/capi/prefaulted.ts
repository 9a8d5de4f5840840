import { Worker } from 'node:worker_threads';

/**
 * Output memory whose pages are already mapped. Each batch's outputs go to memory of their own that is handed to
 * the responses and never comes back, and the first write to a fresh page costs a fault and the kernel's zeroing:
 * on the H200 a 6.3 MB BERT output took 1.2 ms to copy into fresh memory, several times the copy itself. A helper
 * thread allocates buffers of the sizes asked for and touches every page while the instance's GPU run goes on, then
 * transfers them here; `take` hands one out (the caller's copy then only copies) or nothing, when none is ready.
 *
 * Nothing is reused: a buffer taken is the caller's for good, so no response can ever see another's bytes. Memory
 * held: at most `depth` ready buffers per size in use, and never more than `maxBytes` ready or asked for in all.
 * Threading: one owner thread, the one the instance runs on (the main thread, or its engine thread).
 */

/** The helper thread: allocates, touches one byte per page (a write maps the page), transfers. Plain JavaScript. */
const HELPER = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ bytes, n }) => {
  for (let i = 0; i < n; i++) {
    const b = new ArrayBuffer(bytes);
    const v = new Uint8Array(b);
    for (let p = 0; p < bytes; p += 4096) v[p] = 0;
    parentPort.postMessage(b, [b]);
  }
});
`;

export class PrefaultedBuffers {
  readonly #depth: number;
  readonly #maxBytes: number;
  /** Bytes ready or asked for. */
  #held = 0;
  readonly #ready = new Map<number, ArrayBuffer[]>();
  /** Buffers asked of the helper and not arrived yet, by size. */
  readonly #asked = new Map<number, number>();
  #worker: Worker | undefined;
  #closed = false;

  constructor(depth = 2, maxBytes = 256 << 20) {
    this.#depth = depth;
    this.#maxBytes = maxBytes;
  }

  /** A ready buffer of exactly `bytes`, or undefined; either way the helper is asked to have `depth` ready. */
  take(bytes: number): ArrayBuffer | undefined {
    if (this.#closed || bytes <= 0) return undefined;
    const buffer = this.#ready.get(bytes)?.pop();
    if (buffer !== undefined) this.#held -= bytes;
    this.#refill(bytes);
    return buffer;
  }

  /** Ends the helper thread and drops what is ready. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready.clear();
    void this.#worker?.terminate();
    this.#worker = undefined;
  }

  #refill(bytes: number): void {
    const have = (this.#ready.get(bytes)?.length ?? 0) + (this.#asked.get(bytes) ?? 0);
    const n = Math.min(this.#depth - have, Math.floor((this.#maxBytes - this.#held) / bytes));
    if (n <= 0) return;
    this.#asked.set(bytes, (this.#asked.get(bytes) ?? 0) + n);
    this.#held += n * bytes;
    this.#helper().postMessage({ bytes, n });
  }

  #helper(): Worker {
    if (this.#worker !== undefined) return this.#worker;
    const w = new Worker(HELPER, { eval: true });
    // The helper never keeps its owner alive, and a helper that fails only means fresh memory again.
    w.unref();
    w.on('message', (b: ArrayBuffer) => {
      this.#asked.set(b.byteLength, Math.max(0, (this.#asked.get(b.byteLength) ?? 1) - 1));
      if (this.#closed) return;
      // (still counted in #held: asked, now ready)
      const list = this.#ready.get(b.byteLength) ?? [];
      list.push(b);
      this.#ready.set(b.byteLength, list);
    });
    w.on('error', () => this.close());
    this.#worker = w;
    return w;
  }
}
