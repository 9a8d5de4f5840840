import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { h200, nvmlDouble } from '../../test/helpers/nvml-double.js';
import { decodeCString, decodeMemory, decodeUtilization, formatCudaVersion } from './nvml-api.js';
import { Nvml } from './nvml.js';
import { visibleDevices } from './visible.js';

async function openWith(api: Parameters<typeof Nvml.open>[0], env: NodeJS.ProcessEnv = {}): Promise<Nvml> {
  const n = await Nvml.open(api, env);
  assert.ok(n instanceof Nvml, JSON.stringify(n));
  return n;
}

describe('NVML struct decoding', () => {
  it('reads nvmlMemory_t as three little-endian unsigned 64-bit integers: total, free, used', () => {
    const b = Buffer.alloc(24);
    b.writeBigUInt64LE(150_754_820_096n, 0);
    b.writeBigUInt64LE(1n, 8);
    b.writeBigUInt64LE(2n ** 40n, 16);
    assert.deepEqual(decodeMemory(b), { totalBytes: 150_754_820_096, freeBytes: 1, usedBytes: 2 ** 40 });
  });

  it('reads nvmlUtilization_t percents as shares', () => {
    const b = Buffer.alloc(8);
    b.writeUInt32LE(100, 0);
    b.writeUInt32LE(7, 4);
    assert.deepEqual(decodeUtilization(b), { gpu: 1, memory: 0.07 });
  });

  it('cuts C strings at the first NUL and formats CUDA versions', () => {
    assert.equal(decodeCString(Buffer.from('580.65.06\0garbage')), '580.65.06');
    assert.equal(decodeCString(Buffer.from('no-nul')), 'no-nul');
    assert.equal(formatCudaVersion(13000), '13.0');
    assert.equal(formatCudaVersion(12090), '12.9');
  });
});

describe('Nvml over a test double of the NVML function table', () => {
  it('enumerates devices with names and UUIDs and reads the driver', async () => {
    const { api, state } = nvmlDouble([h200(0), h200(1)]);
    const n = await openWith(api);
    assert.deepEqual(
      n.devices.map((d) => [d.index, d.name, d.uuid]),
      [
        [0, 'NVIDIA H200', h200(0).uuid],
        [1, 'NVIDIA H200', h200(1).uuid],
      ],
    );
    assert.deepEqual(await n.driver(), { driverVersion: '580.65.06', cudaDriverVersion: '13.0' });
    await n.close();
    await n.close();
    assert.equal(state.shutdowns, 1, 'close() shuts NVML down once');
  });

  it('converts units: milliwatts to watts, millijoules to joules, percent to share', async () => {
    const { api } = nvmlDouble([h200(0)]);
    const n = await openWith(api);
    const r = await n.read(n.devices[0]);
    assert.deepEqual(r, {
      failures: {},
      memoryTotalBytes: 150_754_820_096,
      memoryUsedBytes: 754_820_096,
      utilization: 0.37,
      powerWatts: 123.456,
      powerLimitWatts: 700,
      energyJoules: 5000,
    });
    await n.close();
  });

  it('leaves out a field the GPU does not support and says why', async () => {
    const { api } = nvmlDouble([h200(0, { powerMilliwatts: undefined, fail: { deviceGetMemoryInfo: 15 } })]);
    const n = await openWith(api);
    const r = await n.read(n.devices[0]);
    assert.equal(r.powerWatts, undefined);
    assert.equal(r.memoryTotalBytes, undefined);
    assert.equal(r.utilization, 0.37);
    assert.deepEqual(r.failures, {
      power: { message: 'Not Supported', notSupported: true },
      memory: { message: 'GPU is lost', notSupported: false },
    });
    await n.close();
  });

  it('reports no CUDA version where libcuda is absent', async () => {
    const { api } = nvmlDouble([h200(0)], { cudaVersion: undefined });
    const n = await openWith(api);
    assert.deepEqual(await n.driver(), { driverVersion: '580.65.06', cudaDriverVersion: undefined });
    await n.close();
  });

  it('skips a GPU whose handle cannot be had (no permission) and keeps the rest', async () => {
    const { api } = nvmlDouble([h200(0, { fail: { deviceGetHandleByIndex: 4 } }), h200(1)]);
    const n = await openWith(api);
    assert.deepEqual(
      n.devices.map((d) => d.index),
      [1],
    );
    await n.close();
  });

  it('BAD CALL - a driver that is installed but not loaded is unavailable with NVML’s reason', async () => {
    const { api } = nvmlDouble([], { initCode: 9 });
    const n = await Nvml.open(api, {});
    assert.ok(!(n instanceof Nvml));
    assert.match(n.reason, /NVML did not start: Driver Not Loaded/);
  });

  it('shows only CUDA-visible GPUs while allDevices keeps every GPU', async () => {
    const { api } = nvmlDouble([h200(0), h200(1), h200(2)]);
    const n = await openWith(api, { CUDA_VISIBLE_DEVICES: '2,0' });
    assert.deepEqual(
      n.devices.map((d) => d.index),
      [2, 0],
    );
    assert.equal(n.allDevices.length, 3);
    await n.close();
  });
});

describe('visibleDevices (CUDA_VISIBLE_DEVICES)', () => {
  const all = [0, 1, 2].map((i) => ({ index: i, uuid: `GPU-${i}abc-${i}` }));
  const ids = (env: string | undefined) => visibleDevices(all, env).map((d) => d.index);

  it('unset shows every GPU; empty or -1 shows none', () => {
    assert.deepEqual(ids(undefined), [0, 1, 2]);
    assert.deepEqual(ids(''), []);
    assert.deepEqual(ids('-1'), []);
  });

  it('takes indexes and UUID prefixes, and stops at the first entry naming no GPU', () => {
    assert.deepEqual(ids('1, GPU-2'), [1, 2]);
    assert.deepEqual(ids('0,7,1'), [0]);
    assert.deepEqual(ids('GPU-,1'), [], 'an ambiguous UUID prefix names no GPU');
    assert.deepEqual(ids('1,1'), [1]);
  });
});
