/**
 * TEST DOUBLE of page-locked host memory (cudaMallocHost/cudaFreeHost) for the libcudart doubles: plain host
 * memory, each view's memory kept in `pinned` until freed, so tests can check each is freed once.
 */
export function pinnedAlloc(pinned: Set<ArrayBuffer>, bytes: number): Uint8Array {
  const view = new Uint8Array(bytes);
  pinned.add(view.buffer);
  return view;
}

export function pinnedFree(pinned: Set<ArrayBuffer>, view: Uint8Array): void {
  if (!pinned.delete(view.buffer as ArrayBuffer)) throw new Error('cudaFreeHost: not page-locked memory');
}
