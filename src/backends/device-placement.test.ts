import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DeviceBuffer } from '../core/device.js';
import type { Tensor } from '../core/tensor.js';
import type { EngineRequest } from './contract.js';
import { placeRequests } from './device-placement.js';

/** Device memory is never touched here: `toHost` stands for the cudaMemcpy (its calls are counted). */
describe('placeRequests', () => {
  const on = (device: number, address: bigint, byteSize = 8): DeviceBuffer => ({
    kind: 'cuda',
    device,
    address,
    byteSize,
  });
  const a = on(1, 0x1000n);
  const b = on(0, 0x2000n);
  const out = on(1, 0x3000n);
  const copies: DeviceBuffer[] = [];
  const devTensor = (name: string, d: DeviceBuffer): Tensor => ({
    name,
    datatype: 'INT32',
    shape: [1, 2],
    data: new Int32Array(0),
    device: d,
  });
  const request = (): EngineRequest => ({
    inputs: [
      devTensor('A', a),
      devTensor('B', b),
      { name: 'C', datatype: 'INT32', shape: [1, 2], data: Int32Array.of(5, 6) },
    ],
    outputs: ['Y'],
    batchSize: 1,
    device: {
      outputs: new Map([['Y', out]]),
      toHost: (d) => {
        copies.push(d);
        return new Uint8Array(Int32Array.of(Number(d.address), d.device).buffer);
      },
    },
  });

  it('passes a batch without device tensors through untouched (same array)', () => {
    const plain: EngineRequest[] = [{ inputs: [], outputs: [], batchSize: 1 }];
    assert.equal(placeRequests(plain, { kind: 'cuda', device: 0 }), plain);
  });

  it('keeps tensors on the instance’s device and copies only the others to the host', () => {
    copies.length = 0;
    const [r] = placeRequests([request()], { kind: 'cuda', device: 1 });
    assert.equal(r.inputs[0].device, a, 'same device: zero copy');
    assert.equal(r.inputs[1].device, undefined);
    assert.deepEqual([...(r.inputs[1].data as Int32Array)], [0x2000, 0], 'the host copy of B');
    assert.deepEqual([...(r.inputs[2].data as Int32Array)], [5, 6], 'host inputs as they were');
    assert.deepEqual(copies, [b]);
    assert.deepEqual([...(r.device?.outputs.keys() ?? [])], ['Y'], 'the output buffer is on this device');
  });

  it('a CPU instance gets host copies of every device input, no output buffers, and no `device` at all', () => {
    copies.length = 0;
    const [r] = placeRequests([request()], undefined);
    assert.ok(r.inputs.every((t) => t.device === undefined));
    assert.deepEqual([...(r.inputs[0].data as Int32Array)], [0x1000, 1]);
    assert.equal(copies.length, 2);
    assert.equal(r.device, undefined, 'nothing left that could not cross to a thread or a process');
    assert.deepEqual(r.outputs, ['Y']);
  });

  it('an instance on another device keeps the tensors of its own device only', () => {
    copies.length = 0;
    const [r] = placeRequests([request()], { kind: 'cuda', device: 0 });
    assert.equal(r.inputs[1].device, b);
    assert.equal(r.inputs[0].device, undefined);
    assert.equal(r.device?.outputs.size, 0, 'the output on GPU 1 is written by the server from host data');
  });

  it('BAD CALL - a failing device copy throws (the batch fails, no half-placed request runs)', () => {
    const r = request();
    const failing: EngineRequest = {
      ...r,
      device: {
        outputs: r.device!.outputs,
        toHost: () => {
          throw new Error('cudaMemcpy (device to host) failed: an illegal memory access');
        },
      },
    };
    assert.throws(() => placeRequests([failing], undefined), /illegal memory access/);
  });
});
