import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { FakeCudaRuntime } from '../../../test/helpers/fake-cudart.js';
import { loadCudaRuntime } from '../../native/cudart.js';
import { CudaSharedMemory } from './cuda.js';

const manager = (rt: FakeCudaRuntime | undefined, systemNames: string[] = []): CudaSharedMemory =>
  new CudaSharedMemory({
    enabled: true,
    systemHas: (n) => systemNames.includes(n),
    runtime: rt === undefined ? () => ({ reason: 'no CUDA here' }) : () => rt,
  });

/** cu12's libcudart from the project's Python environment, where it is installed (this machine has no driver). */
const CU12 = '/work/main/.venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12';

describe('CudaSharedMemory', () => {
  it('BAD CALL - without CUDA (no library, or a library and no driver) registration is Triton\'s 400 "GPUs not supported"', () => {
    const shm = manager(undefined);
    assert.throws(
      () => shm.register('c', new Uint8Array(64), 0n, 64n),
      (err: Error & { code?: string }) =>
        err.code === 'INVALID_ARG' &&
        err.message === "failed to register CUDA shared memory region: 'c', GPUs not supported",
    );
    assert.deepEqual(shm.status(), []);
  });

  it('the real libcudart loads here and reports no device: registration answers "GPUs not supported"', (t) => {
    if (!existsSync(CU12) && process.env.NEREID_CUDART_LIBRARY === undefined) return t.skip('no libcudart here');
    process.env.NEREID_CUDART_LIBRARY ??= CU12;
    const rt = loadCudaRuntime();
    assert.ok(!('reason' in rt), 'reason' in rt ? rt.reason : '');
    assert.equal(rt.deviceCount(), 0, 'no driver on this machine');
    const shm = new CudaSharedMemory({ enabled: true, systemHas: () => false });
    assert.throws(() => shm.register('c', new Uint8Array(64), 0n, 64n), /'c', GPUs not supported/);
  });

  it('reads and writes a registered device buffer at the request offset (test double of libcudart)', async () => {
    const rt = new FakeCudaRuntime();
    const { handle, memory } = rt.allocate(0, 64);
    memory.set(Array.from({ length: 64 }, (_, i) => i));
    const shm = manager(rt);
    shm.register('c', handle, 0n, 64n);
    assert.deepEqual(shm.status(), [{ name: 'c', device_id: 0, byte_size: 64 }]);
    assert.deepEqual(shm.status('c'), [{ name: 'c', device_id: 0, byte_size: 64 }]);
    const slice = shm.acquire('c', 8n, 4n);
    assert.equal(slice.device, 0);
    assert.deepEqual([...(await slice.read())], [8, 9, 10, 11]);
    slice.write(Uint8Array.from([7, 7]));
    assert.deepEqual([...memory.subarray(8, 12)], [7, 7, 10, 11]);
    shm.release(slice);
    shm.close();
    assert.equal(rt.openCount, 0);
  });

  it('checks request slices in 64-bit arithmetic, in Triton order and wording', () => {
    const rt = new FakeCudaRuntime();
    const shm = manager(rt);
    shm.register('c', rt.allocate(0, 64).handle, 0n, 64n);
    assert.throws(() => shm.acquire('c', 64n, 0n), /Invalid offset for shared memory region: 'c'/);
    assert.throws(
      () => shm.acquire('c', 32n, 2n ** 64n - 32n),
      /Integer overflow detected: byte_size \(18446744073709551584\)/,
    );
    assert.throws(() => shm.acquire('c', 1n, 64n), /Invalid offset \+ byte size for shared memory region: 'c'/);
    assert.throws(() => shm.acquire('nope', 0n, 1n), /Unable to find shared memory region: 'nope'/);
    shm.close();
  });

  it('BAD CALL - wrong handle length, bad device id, a registration larger than the allocation, a taken name', () => {
    const rt = new FakeCudaRuntime(2);
    const shm = manager(rt, ['sys']);
    const { handle } = rt.allocate(1, 64);
    assert.throws(
      () => shm.register('c', handle.subarray(0, 63), 1n, 64n),
      /'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t/,
    );
    assert.throws(
      () => shm.register('c', handle, 2n, 64n),
      /failed to register shared memory region 'c': invalid args \(device_id 2: this server sees 2 GPUs, 0 to 1\)/,
    );
    assert.throws(() => shm.register('c', handle, -1n, 64n), /device_id -1/);
    assert.throws(
      () => shm.register('c', handle, 0n, 64n),
      /failed to register shared memory region: invalid args \(.*invalid device context/,
    );
    assert.throws(
      () => shm.register('c', new Uint8Array(64), 1n, 64n),
      /failed to register shared memory region: invalid args/,
    );
    assert.throws(
      () => shm.register('c', handle, 1n, 65n),
      /failed to register shared memory region 'c': invalid args$/,
    );
    assert.equal(rt.openCount, 0, 'the handle opened for the too-large registration was closed again');
    assert.throws(
      () => shm.register('sys', handle, 1n, 64n),
      (err: Error & { code?: string }) => err.code === 'ALREADY_EXISTS' && /'sys' already in manager/.test(err.message),
    );
    shm.register('c', handle, 1n, 64n);
    assert.throws(() => shm.register('c', handle, 1n, 64n), /shared memory region 'c' already in manager/);
    assert.throws(() => shm.status('sys'), /registered as system shared memory, not CUDA shared memory/);
    assert.throws(() => shm.status('x'), /Unable to find cuda shared memory region: 'x'/);
    shm.close();
  });

  it('an unregistered region in use stays open, for new requests too, and closes when the last releases it (Triton awaiting_unregister)', async () => {
    const rt = new FakeCudaRuntime();
    const { handle } = rt.allocate(0, 64);
    const shm = manager(rt);
    shm.register('c', handle, 0n, 64n);
    const held = shm.acquire('c', 0n, 4n);
    shm.unregister();
    assert.equal(rt.closed, 0, 'not closed under a request');
    assert.equal(shm.status().length, 1, 'listed while in use');
    const late = shm.acquire('c', 0n, 4n); // Triton: usable by new requests until really released
    assert.equal((await held.read()).length, 4, 'the holder still reads');
    shm.release(held);
    assert.equal(rt.closed, 0, 'the late user holds it');
    shm.release(late);
    assert.equal(rt.closed, 1);
    assert.deepEqual(shm.status(), []);
    shm.register('c', handle, 0n, 64n); // the name is free again
    shm.unregister('c');
    assert.equal(rt.closed, 2);
    shm.unregister('never-registered'); // fine, as in Triton
  });

  it("BAD CALL - disabled client shared memory refuses register and unregister with Triton's 501", () => {
    const shm = new CudaSharedMemory({ enabled: false, systemHas: () => false });
    assert.throws(() => shm.register('c', new Uint8Array(64), 0n, 64n), /Client shared memory is disabled/);
    assert.throws(() => shm.unregister(), /Client shared memory is disabled/);
    assert.throws(
      () => manager(undefined).checkRegister(''),
      /'region name' is necessary to register cuda shared memory region/,
    );
  });
});
