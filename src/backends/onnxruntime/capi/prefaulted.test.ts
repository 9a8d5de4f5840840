import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PrefaultedBuffers } from './prefaulted.js';

/** Takes a buffer of `bytes` once the helper has one ready (a real helper thread: no double here). */
async function takeReady(p: PrefaultedBuffers, bytes: number): Promise<ArrayBuffer> {
  for (let i = 0; i < 200; i++) {
    const b = p.take(bytes);
    if (b !== undefined) return b;
    await sleep(10);
  }
  throw new Error(`no buffer of ${bytes} bytes within 2 s`);
}

describe('prefaulted output memory', () => {
  it('hands out buffers of the size asked for, each its own, made ahead by the helper thread', async () => {
    const p = new PrefaultedBuffers(2);
    try {
      assert.equal(p.take(1 << 20), undefined, 'nothing ready before the first ask');
      const a = await takeReady(p, 1 << 20);
      const b = await takeReady(p, 1 << 20);
      assert.equal(a.byteLength, 1 << 20);
      assert.notEqual(a, b);
      new Uint8Array(a).fill(7);
      assert.equal(new Uint8Array(b)[12345], 0, 'never the same memory twice');
      // Transferable (the engine thread sends outputs on): structuredClone with a transfer list detaches it.
      const moved = structuredClone(a, { transfer: [a] });
      assert.equal(a.byteLength, 0);
      assert.equal(new Uint8Array(moved)[0], 7);
      const other = await takeReady(p, 4096 * 3);
      assert.equal(other.byteLength, 4096 * 3, 'another size, its own supply');
    } finally {
      p.close();
    }
  });

  it('BAD INPUT - never holds more than its byte bound; after close it hands out nothing', async () => {
    const p = new PrefaultedBuffers(4, 3 << 20);
    try {
      p.take(2 << 20); // asks for one only: two would pass the 3 MiB bound
      await takeReady(p, 2 << 20);
      await sleep(100); // the one asked for after that take is ready by now, and only that one
      assert.ok(p.take(2 << 20) !== undefined);
      assert.equal(p.take(2 << 20), undefined, 'never a second one ready: it would pass the bound');
      assert.equal(p.take(0), undefined);
      assert.equal(p.take(-1), undefined);
    } finally {
      p.close();
      p.close();
    }
    assert.equal(p.take(1 << 20), undefined);
  });
});
