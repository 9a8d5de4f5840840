import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FakeCudaRuntime } from '../../../test/helpers/fake-cudart.js';
import type { InferRequest } from '../../core/inference.js';
import { bindSharedMemory, sliceSource } from './bind.js';
import { CudaSharedMemory } from './cuda.js';
import { SystemSharedMemory } from './regions.js';

/** Binding CUDA slices as device tensors or host copies, against a TEST DOUBLE of libcudart. */
describe('bindSharedMemory with CUDA regions', () => {
  function setup(): { rt: FakeCudaRuntime; cuda: CudaSharedMemory; memory: Buffer } {
    const rt = new FakeCudaRuntime(1);
    const cuda = new CudaSharedMemory({ enabled: true, systemHas: () => false, runtime: () => rt });
    const { handle, memory } = rt.allocate(0, 1024);
    new Int32Array(memory.buffer, memory.byteOffset, 4).set([1, 2, 3, 4]);
    cuda.register('r', handle, 0n, 1024n);
    return { rt, cuda, memory };
  }
  const ref = (offset: number, byteSize: number): { region: string; offset: bigint; byteSize: bigint } => ({
    region: 'r',
    offset: BigInt(offset),
    byteSize: BigInt(byteSize),
  });
  const request = (inOffset: number, inBytes = 16, datatype: 'INT32' | 'BYTES' = 'INT32'): InferRequest => ({
    model: 'm',
    inputs: [{ name: 'X', datatype, shape: [4], data: new Int32Array(0), sharedMemory: ref(inOffset, inBytes) }],
    outputs: [{ name: 'Y', sharedMemory: ref(512, 64) }],
  });

  it('with device tensors allowed, an aligned slice stays on the device: no copy, empty data, its address', async () => {
    const { rt, cuda } = setup();
    const bound = await bindSharedMemory(sliceSource(new SystemSharedMemory({ enabled: true }), cuda), request(0), {
      deviceTensors: true,
    });
    const x = bound.request.inputs[0];
    assert.equal(rt.hostCopies, 0);
    assert.equal(x.data.length, 0);
    assert.equal(x.device?.device, 0);
    assert.equal(x.device?.byteSize, 16);
    const y = bound.request.device?.outputs.get('Y');
    assert.equal(y?.address, (x.device?.address ?? 0n) + 512n);
    assert.deepEqual([...new Int32Array(bound.request.device!.toHost(x.device!).buffer, 0, 4)], [1, 2, 3, 4]);
    assert.equal(rt.hostCopies, 1, 'toHost is the one copy, made only when asked');
    bound.release();
  });

  it('without the option, or for a misaligned slice, or a BYTES input, the slice is read to the host at once', async () => {
    for (const [req, deviceTensors] of [
      [request(0), false],
      [request(4, 16), true],
    ] as const) {
      const { rt, cuda } = setup();
      const src = sliceSource(new SystemSharedMemory({ enabled: true }), cuda);
      const bound = await bindSharedMemory(src, req, { deviceTensors });
      assert.equal(bound.request.inputs[0].device, undefined);
      assert.equal(rt.hostCopies, 1);
      if (!deviceTensors) assert.equal(bound.request.device, undefined);
      bound.release();
    }
    const { cuda, memory } = setup();
    new DataView(memory.buffer, memory.byteOffset).setUint32(0, 1, true);
    memory[4] = 0x61;
    const src = sliceSource(new SystemSharedMemory({ enabled: true }), cuda);
    const bytes = {
      ...request(0, 5, 'BYTES'),
      inputs: [{ ...request(0, 5).inputs[0], datatype: 'BYTES' as const, shape: [1] }],
    };
    const bound = await bindSharedMemory(src, bytes, { deviceTensors: true });
    assert.deepEqual(bound.request.inputs[0].data, [Uint8Array.of(0x61)]);
    bound.release();
  });

  it('an output the engine wrote on the device is not copied again; its reference says how much was written', async () => {
    const { rt, cuda } = setup();
    const bound = await bindSharedMemory(sliceSource(new SystemSharedMemory({ enabled: true }), cuda), request(0), {
      deviceTensors: true,
    });
    const y = bound.request.device!.outputs.get('Y')!;
    const res = bound.finish({
      model: 'm',
      version: '1',
      outputs: [{ name: 'Y', datatype: 'INT32', shape: [4], data: new Int32Array(0), device: { ...y, byteSize: 16 } }],
    });
    assert.equal(rt.hostCopies, 0);
    assert.deepEqual(res.outputs[0].sharedMemory, { region: 'r', offset: 512n, byteSize: 16n });
    assert.throws(
      () =>
        bound.finish({
          model: 'm',
          version: '1',
          outputs: [
            { name: 'Y', datatype: 'INT32', shape: [4], data: new Int32Array(0), device: { ...y, address: 8n } },
          ],
        }),
      /output 'Y' was written to device memory it was not given/,
    );
    bound.release();
  });

  it('BAD CALL - a device input whose slice does not hold its shape is refused with the binary-input wording', async () => {
    const { rt, cuda } = setup();
    const src = sliceSource(new SystemSharedMemory({ enabled: true }), cuda);
    await assert.rejects(
      bindSharedMemory(src, request(0, 12), { deviceTensors: true }),
      /input byte size mismatch for input 'X' for model 'm'. Expected 16, got 12/,
    );
    assert.equal(rt.hostCopies, 0);
    cuda.unregister('r');
    assert.equal(rt.openCount, 0, 'the refused request released its slices');
  });
});
