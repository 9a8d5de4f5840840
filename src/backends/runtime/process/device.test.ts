import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { DeviceBuffer } from '../../../core/device.js';
import type { EngineRequest } from '../../contract.js';
import { ChildCudaRegions, deviceWire, hostCopiesWithoutIpc } from './device.js';
import type { TensorDesc, ToChild } from './protocol.js';
import { PeerSegments } from './shm.js';
import { readTensorGroups } from './wire.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const PY_TESTS = `${ROOT}test/fixtures/cuda/test_device_tensors.py`;

function buffer(region: number, offset: number, closed = new AbortController().signal, byteSize = 64): DeviceBuffer {
  const handle = new Uint8Array(64).fill(region);
  return {
    kind: 'cuda',
    device: 1,
    address: 0x1000n + BigInt(offset),
    byteSize,
    ipc: { region, handle, offset, closed },
  };
}

function deviceRequest(inputs: DeviceBuffer[], outputs: [string, DeviceBuffer][]): EngineRequest {
  return {
    inputs: inputs.map((b, i) => ({
      name: `INPUT${i}`,
      datatype: 'INT32',
      shape: [1, 16],
      data: new Int32Array(0),
      device: b,
    })),
    outputs: outputs.map(([n]) => n),
    batchSize: 1,
    device: { outputs: new Map(outputs), toHost: () => new Uint8Array(64) },
  };
}

describe('process transport: device tensors on the wire', () => {
  it('names each region once with its handle, and each device input and output slot by region and offset', () => {
    const r = deviceRequest([buffer(3, 0), buffer(3, 256)], [['OUTPUT0', buffer(4, 0)]]);
    const descs: TensorDesc[][] = [
      [
        ['INPUT0', 'INT32', [1, 16], 0, 0],
        ['INPUT1', 'INT32', [1, 16], 0, 0],
      ],
    ];
    const wire = deviceWire([r], descs);
    assert.ok(wire);
    assert.deepEqual(
      wire.cuda.map(([id, device, h]) => [id, device, Buffer.from(h, 'base64')[0]]),
      [
        [3, 1, 3],
        [4, 1, 4],
      ],
    );
    assert.deepEqual(descs[0], [
      ['INPUT0', 'INT32', [1, 16], -1, 64, 3, 0],
      ['INPUT1', 'INT32', [1, 16], -1, 64, 3, 256],
    ]);
    assert.deepEqual(wire.slots, [{ OUTPUT0: [4, 0, 64] }]);
  });

  it('leaves a batch without device tensors untouched (one check)', () => {
    const plain: EngineRequest = { inputs: [], outputs: ['A'], batchSize: 1 };
    assert.equal(deviceWire([plain], [[]]), undefined);
    const batch = [plain];
    assert.equal(hostCopiesWithoutIpc(batch), batch);
  });

  it('copies to the host a device input that has no IPC handle (it cannot be named to another process)', () => {
    const { ipc: _none, ...bare } = buffer(1, 0);
    const r = deviceRequest([bare], []);
    const [copied] = hostCopiesWithoutIpc([r]);
    assert.equal(copied.inputs[0].device, undefined);
    assert.equal((copied.inputs[0].data as Int32Array).length, 16);
  });

  it('tells the child to close a region once the server closes it, and nothing after the process is gone', () => {
    const sent: ToChild[] = [];
    const regions = new ChildCudaRegions((m) => sent.push(m));
    const a = new AbortController();
    const b = new AbortController();
    regions.note([buffer(1, 0, a.signal).ipc!, buffer(2, 0, b.signal).ipc!]);
    regions.note([buffer(1, 0, a.signal).ipc!]);
    assert.equal(regions.size, 2, 'each region noted once');
    a.abort();
    assert.deepEqual(sent, [{ op: 'cuda_close', r: [1] }]);
    regions.dispose();
    b.abort();
    assert.equal(sent.length, 1, 'the process is gone: nothing to close');
  });

  it('reads an output the child wrote in place as a device tensor over the offered buffer', () => {
    const slot = buffer(4, 0, undefined, 128);
    const peer = new PeerSegments('nereid_test_unused_');
    const { tensors, bytes } = readTensorGroups(peer, null, [[['OUTPUT0', 'INT32', [1, 16], -1, 64]]], 'child', [
      new Map([['OUTPUT0', slot]]),
    ]);
    assert.equal(bytes, 0);
    assert.deepEqual(tensors[0][0].device, { ...slot, byteSize: 64 });
    assert.equal((tensors[0][0].data as Int32Array).length, 0);
  });

  it('BAD CHILD - an output claimed written in device memory it was not given, or larger than it, is INTERNAL', () => {
    const peer = new PeerSegments('nereid_test_unused_');
    const desc: TensorDesc = ['OUTPUT0', 'INT32', [1, 16], -1, 64];
    assert.throws(
      () => readTensorGroups(peer, null, [[desc]], 'child 7', [undefined]),
      /child 7 sent output 'OUTPUT0' as written in device memory it was not given/,
    );
    const small = new Map([['OUTPUT0', buffer(4, 0, undefined, 32)]]);
    assert.throws(() => readTensorGroups(peer, null, [[desc]], 'child 7', [small]), /into a device buffer of 32 bytes/);
    const wrong: TensorDesc = ['OUTPUT0', 'INT32', [1, 16], -1, 60];
    const big = new Map([['OUTPUT0', buffer(4, 0, undefined, 128)]]);
    assert.throws(() => readTensorGroups(peer, null, [[wrong]], 'child 7', [big]), /needs 64/);
  });
});

describe('child side of client CUDA memory (python, TEST DOUBLE of the CUDA runtime)', () => {
  it('caches regions by handle, builds GPU tensors over them, writes outputs into the client buffers, pytorch in place', () => {
    const venv = `${ROOT}.venv/bin/python`;
    const python = existsSync(venv) ? venv : 'python3';
    const r = spawnSync(python, [PY_TESTS], { encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /device tensors ok/);
    // The pytorch part needs torch (the repository .venv has it after setup-python.sh --torch; CI installs it).
    if (!/pytorch in place skipped/.test(r.stdout)) assert.match(r.stdout, /pytorch in place ok/);
  });
});
