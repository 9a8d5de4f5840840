/**
 * Memory a response's outputs view instead of owning: a transport's shared-memory block, a pooled page-locked
 * buffer. Whoever holds the response gives the memory back by calling `release` once it can no longer read it —
 * the protocol after the response's bytes were written to the socket (or the write was abandoned). Until then
 * the owner never hands the memory to anyone else, so no response can see another's bytes.
 *
 * Views are opt-in per request (`EngineRequest.viewsOk`): only a caller that promises to release (the HTTP binary
 * path, on the main thread or a front-end thread, which gets the larger outputs by address: frontend/wire.ts) gets
 * them; every other consumer (the response cache, ensembles, sequences, traces of tensors) gets tensors that own
 * their bytes, as before.
 */
export interface Lease {
  /** Gives the memory back. Idempotent: a second call does nothing. */
  release(): void;
}

/**
 * One piece of memory shared by several holders (a block holding several requests' responses): given back when
 * every holder released its share. `count` holders start with a share each.
 */
export class SharedLease {
  #left: number;
  readonly #free: () => void;

  constructor(count: number, free: () => void) {
    this.#left = count;
    this.#free = free;
    if (count <= 0) free();
  }

  /** One holder's share, released at most once. */
  share(): Lease {
    let done = false;
    return {
      release: () => {
        if (done) return;
        done = true;
        if (--this.#left === 0) this.#free();
      },
    };
  }
}
