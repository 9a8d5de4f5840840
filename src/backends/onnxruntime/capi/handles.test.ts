import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import koffi from 'koffi';
import { addressOf, PointerArray, pointerOf } from './handles.js';

describe('native handles as addresses', () => {
  it('a pointer array keeps addresses above 4 GiB exactly, in native 64-bit layout', () => {
    const a = new PointerArray(3);
    try {
      const high = 2 ** 47 - 4096 + 8;
      a.set(0, high);
      a.set(1, 0);
      a.set(2, 2 ** 32 + 1);
      assert.deepEqual([a.get(0), a.get(1), a.get(2)], [high, 0, 2 ** 32 + 1]);
      // What onnxruntime reads: the same values as 64-bit integers.
      const native = koffi.decode(a.pointer, koffi.array('uint64_t', 3)) as (number | bigint)[];
      assert.deepEqual(native.map(BigInt), [BigInt(high), 0n, BigInt(2 ** 32 + 1)]);
    } finally {
      a.free();
    }
  });

  it('an address and its pointer object name the same memory', () => {
    const mem = koffi.alloc('uint8_t', 16);
    try {
      const addr = addressOf(mem as object);
      assert.equal(addressOf(pointerOf(addr)), addr);
      assert.equal(pointerOf(mem as object), mem, 'a pointer object is passed through');
    } finally {
      koffi.free(mem);
    }
  });
});
