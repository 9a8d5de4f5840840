import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { OutputPool, type PooledBuffer } from './output-pool.js';

/** TEST DOUBLE of cudaMallocHost/cudaFreeHost: plain memory, every allocation and free counted. */
function memory(): { alloc: (n: number) => Uint8Array; free: (v: Uint8Array) => void; live: Set<ArrayBufferLike> } {
  const live = new Set<ArrayBufferLike>();
  return {
    live,
    alloc: (n) => {
      const v = new Uint8Array(n);
      live.add(v.buffer);
      return v;
    },
    free: (v) => assert.ok(live.delete(v.buffer), 'freed once, and only what was allocated'),
  };
}

const KB = 1024;
const now = (b: PooledBuffer | Promise<PooledBuffer> | undefined): PooledBuffer => {
  assert.ok(b !== undefined && !(b instanceof Promise), 'a buffer at once');
  return b;
};

describe('OutputPool (page-locked output memory, bounded, reused only after its last release)', () => {
  it('sizes by power-of-two classes from 64 KiB and reuses a buffer given back, never one that is lent', () => {
    const m = memory();
    const pool = new OutputPool(m, 1024 * KB);
    const a = now(pool.take(100 * KB));
    assert.equal(a.view.byteLength, 128 * KB);
    const b = now(pool.take(100 * KB));
    assert.notEqual(a.view.buffer, b.view.buffer, 'a lent buffer is never handed out again');
    assert.deepEqual(pool.stats(), { bytes: 256 * KB, lentBytes: 256 * KB, waits: 0, unpooled: 0 });
    pool.give(a);
    pool.give(a); // a second give of the same buffer is ignored
    assert.equal(pool.stats().lentBytes, 128 * KB);
    const c = now(pool.take(90 * KB));
    assert.equal(c.view.buffer, a.view.buffer, 'reused after it came back');
    assert.equal(m.live.size, 2);
  });

  it('at the cap it evicts free buffers of other sizes, then waits in order for one to come back', async () => {
    const m = memory();
    const pool = new OutputPool(m, 256 * KB);
    const small = now(pool.take(64 * KB));
    pool.give(small);
    const big = now(pool.take(256 * KB)); // the free 64 KiB one is freed to make room
    assert.equal(m.live.size, 1);
    const first = pool.take(200 * KB);
    const second = pool.take(10 * KB);
    assert.ok(first instanceof Promise && second instanceof Promise);
    assert.equal(pool.stats().waits, 2);
    pool.give(big);
    const got = await first;
    assert.equal(got.view.buffer, big.view.buffer, 'the waiter gets the buffer that came back');
    pool.give(got);
    assert.equal((await second).view.byteLength, 64 * KB);
    assert.ok(pool.stats().bytes <= 256 * KB);
  });

  it('a waiting take is cancelled with its signal; a batch larger than the pool is not pooled', async () => {
    const pool = new OutputPool(memory(), 64 * KB);
    const held = now(pool.take(64 * KB));
    const ac = new AbortController();
    const waiting = pool.take(64 * KB, ac.signal);
    ac.abort();
    await assert.rejects(waiting as Promise<PooledBuffer>, { code: 'CANCELLED' });
    assert.equal(pool.take(65 * KB), undefined);
    assert.equal(pool.stats().unpooled, 1);
    pool.give(held);
  });

  it('close frees the free buffers at once and lent ones when they come back', () => {
    const m = memory();
    const pool = new OutputPool(m, 1024 * KB);
    const lent = now(pool.take(64 * KB));
    pool.give(now(pool.take(128 * KB)));
    pool.close();
    assert.equal(m.live.size, 1);
    pool.give(lent);
    assert.equal(m.live.size, 0);
    assert.equal(pool.take(64 * KB), undefined, 'a closed pool lends nothing');
  });

  it('when page-locked memory cannot be had, runs get fresh memory (no wait for nothing)', () => {
    const pool = new OutputPool(
      {
        alloc: () => {
          throw new Error('cudaMallocHost failed: out of memory');
        },
        free: () => undefined,
      },
      1024 * KB,
    );
    assert.equal(pool.take(64 * KB), undefined);
    assert.equal(pool.take(64 * KB), undefined);
  });
});

describe('OutputPool waiters', () => {
  it('a cancelled first waiter lets the ones behind it in when they fit', async () => {
    const pool = new OutputPool(memory(), 256 * KB);
    const held = now(pool.take(128 * KB));
    const ac = new AbortController();
    const big = pool.take(256 * KB, ac.signal);
    const small = pool.take(64 * KB);
    assert.ok(small instanceof Promise);
    ac.abort();
    await assert.rejects(big as Promise<PooledBuffer>, { code: 'CANCELLED' });
    assert.equal((await small).view.byteLength, 64 * KB);
    pool.give(held);
  });
});
