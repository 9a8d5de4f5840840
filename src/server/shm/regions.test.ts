import assert from 'node:assert/strict';
import { unlinkSync, writeFileSync } from 'node:fs';
import { after, describe, it } from 'node:test';
import { SystemSharedMemory } from './regions.js';

const key = `/nereid-regions-test-${process.pid}`;
writeFileSync(`/dev/shm${key}`, Buffer.from(Array.from({ length: 64 }, (_, i) => i)));
after(() => unlinkSync(`/dev/shm${key}`));

describe('SystemSharedMemory', () => {
  it('reads and writes slices at the registered offset plus the request offset', async () => {
    const shm = new SystemSharedMemory({ enabled: true });
    shm.register('r', key, 16n, 32n);
    const slice = shm.acquire('r', 4n, 8n);
    assert.deepEqual([...(await slice.read())], [20, 21, 22, 23, 24, 25, 26, 27]);
    slice.write(Uint8Array.from([9, 9]));
    assert.deepEqual([...(await shm.acquire('r', 4n, 2n).read())], [9, 9]);
    shm.close();
  });

  it('checks offsets and sizes in 64-bit arithmetic, in Triton order', () => {
    const shm = new SystemSharedMemory({ enabled: true });
    shm.register('r', key, 0n, 64n);
    assert.throws(() => shm.acquire('r', 64n, 0n), /Invalid offset for shared memory region: 'r'/);
    assert.throws(() => shm.acquire('r', 2n ** 64n - 32n, 1n), /Invalid offset for/);
    assert.throws(
      () => shm.acquire('r', 32n, 2n ** 64n - 32n),
      /Integer overflow detected: byte_size \(18446744073709551584\)/,
    );
    assert.throws(() => shm.acquire('r', 1n, 64n), /Invalid offset \+ byte size/);
    assert.throws(() => shm.acquire('nope', 0n, 1n), /Unable to find shared memory region: 'nope'/);
    shm.close();
  });

  it('an unregistered region in use stays listed and usable, new users too (Triton), until the last releases it', async () => {
    const shm = new SystemSharedMemory({ enabled: true });
    shm.register('r', key, 0n, 64n);
    const held = shm.acquire('r', 0n, 4n);
    shm.unregister();
    assert.equal(shm.status().length, 1, 'listed while in use');
    assert.throws(() => shm.register('r', key, 0n, 64n), /already in manager/, 'the name is still taken');
    const late = shm.acquire('r', 0n, 4n);
    assert.equal((await held.read()).length, 4, 'the holder still reads');
    shm.release(held);
    assert.equal(shm.status().length, 1, 'the late user holds it');
    assert.equal((await late.read()).length, 4);
    shm.release(late);
    assert.deepEqual(shm.status(), []);
    assert.throws(() => shm.acquire('r', 0n, 4n), /Unable to find shared memory region: 'r'/);
    shm.register('r', key, 0n, 64n); // the name is free again
    shm.close();
  });

  it('BAD CALL - disabled, reserved prefix, path keys, and registration past the object', () => {
    assert.throws(
      () => new SystemSharedMemory({ enabled: false }).register('r', key, 0n, 1n),
      /Client shared memory is disabled/,
    );
    const shm = new SystemSharedMemory({ enabled: true });
    assert.throws(() => shm.register('r', '//triton_python_backend_shm_region_x', 0n, 1n), /reserved prefix/);
    assert.throws(() => shm.register('r', '///', 0n, 1n), /invalid shm key '\/\/\/'/);
    assert.throws(() => shm.register('r', '/../etc/passwd', 0n, 1n), /Unable to open shared memory region/);
    assert.throws(() => shm.register('r', key, 0n, 65n), /failed to register shared memory region 'r': invalid args/);
    assert.throws(() => shm.register('', key, 0n, 1n), /'region name' is necessary/);
    shm.close();
  });
});
