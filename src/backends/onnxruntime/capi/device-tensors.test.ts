import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import koffi from 'koffi';
import { Collected, never, open, request } from '../../../../test/helpers/capi-engine.js';
import type { DeviceBuffer } from '../../../core/device.js';
import type { Tensor } from '../../../core/tensor.js';
import type { Handle } from './handles.js';
import { check, ortApi, type Out } from './api.js';
import { CudaTensors, describePlacement, runsOnClientMemory } from './device-tensors.js';
import { typeAndShape } from './tensors.js';

/**
 * What of onnxruntime's device path runs without a GPU: OrtValues over a CUDA address are only descriptions until a
 * run reads them, so they can be created and inspected here (the address is made up and never touched); a CPU
 * instance declares no device memory and refuses a device tensor. Runs on CUDA memory happen on the H200 only
 * (scripts/gpu/cudashm-on-device.sh).
 */

const SIMPLE = join(import.meta.dirname, '../../../../examples/model_repository/simple/1/model.onnx');
const ADDRESS = 0x7f00_0000_0100n;
const buffer = (device: number, byteSize: number): DeviceBuffer => ({
  kind: 'cuda',
  device,
  address: ADDRESS,
  byteSize,
});
const onDevice = (device: number, shape: number[], byteSize = shape.reduce((a, b) => a * b, 1) * 4): Tensor => ({
  name: 'X',
  datatype: 'INT32',
  shape,
  data: new Int32Array(0),
  device: buffer(device, byteSize),
});

/** The data pointer of an OrtValue, as an address. */
function dataAddress(value: Handle): bigint {
  const out: Out = [null];
  check(ortApi().GetTensorMutableData(value, out));
  return BigInt(koffi.address(out[0]));
}

describe('CudaTensors (OrtValues over client CUDA memory)', () => {
  it('an input value lies at the device address with the tensor’s type and shape (index 49 over a uint64)', () => {
    const cuda = new CudaTensors(0);
    try {
      const v = cuda.input(onDevice(0, [2, 3])).value;
      try {
        assert.equal(dataAddress(v), ADDRESS);
        assert.deepEqual(typeAndShape(v), { elementType: 6, shape: [2, 3] });
      } finally {
        ortApi().ReleaseValue(v);
      }
    } finally {
      cuda.release();
    }
  });

  it('a preallocated output lies in the client’s buffer and reports the bytes it fills; a too-small one is declined', () => {
    const cuda = new CudaTensors(1);
    try {
      const out = cuda.output('Y', 'INT32', [1, 16], buffer(1, 128));
      assert.ok(out !== undefined);
      try {
        assert.equal(dataAddress(out.value), ADDRESS);
        assert.equal(out.tensor.device?.byteSize, 64);
        assert.equal(out.tensor.data.length, 0);
      } finally {
        ortApi().ReleaseValue(out.value);
      }
      assert.equal(cuda.output('Y', 'INT32', [1, 16], buffer(1, 60)), undefined, 'the server reports the small slice');
      assert.equal(cuda.output('Y', 'BYTES', [1], buffer(1, 64)), undefined, 'strings stay on the host');
    } finally {
      cuda.release();
    }
  });

  it('BAD CALL - memory of another device, or a size that does not match the shape, is an internal error', () => {
    const cuda = new CudaTensors(0);
    try {
      assert.throws(() => cuda.input(onDevice(1, [4])), /tensor 'X' is in cuda:1, not in this instance's cuda:0/);
      assert.throws(() => cuda.input(onDevice(0, [4], 12)), /does not fill its device buffer/);
      assert.throws(() => cuda.output('Y', 'INT32', [4], buffer(2, 16)), /is in cuda:2/);
    } finally {
      cuda.release();
    }
    assert.throws(() => cuda.input(onDevice(0, [4])), /used after release/);
  });

  it('a session that replays CUDA graphs does not run on client memory (the graph keeps its captured addresses)', () => {
    const cuda = { name: 'cuda', options: [['device_id', '0'] as const] };
    assert.equal(runsOnClientMemory([cuda]), true);
    assert.equal(runsOnClientMemory([{ options: [['trt_cuda_graph_enable', '1'] as const] }, cuda]), false);
    assert.equal(runsOnClientMemory([{ options: [['trt_cuda_graph_enable', '0'] as const] }, cuda]), true);
  });

  it('describes where a run’s tensors were, for the verbose log', () => {
    const host: Tensor = { name: 'Y', datatype: 'INT32', shape: [1], data: Int32Array.of(1) };
    assert.equal(describePlacement([onDevice(0, [1])], [host]), 'inputs X cuda:0; outputs Y host');
  });
});

describe('a KIND_CPU onnxruntime instance and device tensors', () => {
  it('declares no device memory and refuses a device tensor (the host copies them first; this is a guard)', async () => {
    const m = await open(SIMPLE, { max_batch_size: 8 });
    try {
      const instance = m.instances[0];
      assert.equal(instance.deviceMemory, undefined);
      const i32 = (name: string): Tensor => ({ ...onDevice(0, [1, 16]), name });
      const r = new Collected();
      await assert.rejects(
        instance.execute([request([i32('INPUT0'), i32('INPUT1')], ['OUTPUT0'])], r, never()),
        /tensor 'INPUT0' is in device memory, but this instance runs on CPU/,
      );
    } finally {
      await m.close();
    }
  });
});
