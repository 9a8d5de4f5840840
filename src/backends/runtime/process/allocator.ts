/**
 * First-fit allocation of blocks inside one fixed-size shared-memory segment, with neighbouring holes merged on
 * free. Pure bookkeeping: no memory is touched. Blocks are few (one per batch in flight, one per decoupled
 * response), so a sorted array of holes is enough.
 */

/** Blocks start on this boundary: numpy and every TypedArray can view them in place. */
export const SHM_ALIGN = 64;

export function alignUp(n: number): number {
  return Math.ceil(n / SHM_ALIGN) * SHM_ALIGN;
}

export class BlockAllocator {
  readonly size: number;
  /** Holes as [offset, size], sorted by offset, never adjacent. */
  readonly #holes: [number, number][];
  readonly #used = new Map<number, number>();

  constructor(size: number) {
    this.size = size;
    this.#holes = [[0, size]];
  }

  /** Offset of a block of `n` (already aligned) bytes, or -1 when no hole is large enough. */
  alloc(n: number): number {
    const holes = this.#holes;
    for (let i = 0; i < holes.length; i++) {
      const [off, size] = holes[i];
      if (size < n) continue;
      if (size === n) holes.splice(i, 1);
      else holes[i] = [off + n, size - n];
      this.#used.set(off, n);
      return off;
    }
    return -1;
  }

  /** Returns a block; unknown offsets (a peer's double free) are ignored. Returns whether it was in use. */
  free(off: number): boolean {
    const n = this.#used.get(off);
    if (n === undefined) return false;
    this.#used.delete(off);
    const holes = this.#holes;
    let i = 0;
    while (i < holes.length && holes[i][0] < off) i++;
    holes.splice(i, 0, [off, n]);
    if (i + 1 < holes.length && off + n === holes[i + 1][0]) {
      holes[i] = [off, n + holes[i + 1][1]];
      holes.splice(i + 1, 1);
    }
    if (i > 0 && holes[i - 1][0] + holes[i - 1][1] === off) {
      holes[i - 1] = [holes[i - 1][0], holes[i - 1][1] + holes[i][1]];
      holes.splice(i, 1);
    }
    return true;
  }

  /** Bytes in use. */
  get used(): number {
    let n = 0;
    for (const v of this.#used.values()) n += v;
    return n;
  }
}
