import koffi from 'koffi';

/**
 * Memory that any thread of this process can view by its address: an engine process's shared-memory segment as the
 * host mapped it (runtime/process/shm.ts). A front-end thread writes a lent output to its socket from such memory
 * instead of the main thread copying it into a buffer to transfer (frontend/wire.ts): threads share one address
 * space, and V8's ArrayBuffers, which do not cross isolates, can be made over the same pages on the other side.
 *
 * Safety rests on the lease (core/lease.ts): whoever sends an address holds the lease of the memory behind it until
 * the other thread says it no longer reads it, and the owner of the memory unmaps it only once every lease on it
 * was given back. A view made here must not be read after its lease was released.
 *
 * Threading: `register` and `addressOf` on the thread that owns the memory (the main thread); `viewAt` on any.
 */

const bases = new WeakMap<ArrayBuffer, bigint>();

/** `buffer` (an ArrayBuffer over native memory) starts at `address` and stays mapped while a lease on it is held. */
export function registerAddressable(buffer: ArrayBuffer, address: bigint): void {
  bases.set(buffer, address);
}

/** The address of a view's first byte, where its memory was registered; undefined for ordinary JavaScript memory. */
export function addressOf(view: ArrayBufferView): bigint | undefined {
  const base = view.buffer instanceof ArrayBuffer ? bases.get(view.buffer) : undefined;
  return base === undefined ? undefined : base + BigInt(view.byteOffset);
}

/** Bytes `[address, address + length)` of this process's memory, as a new view (see the module's safety rule). */
export function viewAt(address: bigint, length: number): Uint8Array {
  if (length === 0) return new Uint8Array(0);
  const pointer = koffi.decode(BigUint64Array.of(address), 'void *') as unknown;
  return new Uint8Array(koffi.view(pointer, length));
}
