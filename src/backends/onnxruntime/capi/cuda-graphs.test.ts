import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import koffi from 'koffi';
import { FakeCudaRuntime } from '../../../../test/helpers/fake-cudart.js';
import type { Tensor } from '../../../core/tensor.js';
import { check, ortApi, type Out, type Ptr } from './api.js';
import { CudaGraphs, MAX_CUDA_GRAPHS } from './cuda-graphs.js';
import { CudaTensors } from './device-tensors.js';
import { PrefaultedBuffers } from './prefaulted.js';

/**
 * The CUDA graph slots' bookkeeping without a GPU: device memory is the test double of the GPU boundary
 * (FakeCudaRuntime, named as such), the OrtValues are real onnxruntime values over its made-up device addresses
 * (never read here). Capture and replay themselves run on the H200 only (the GPU benchmark's graph variant).
 */

const t = (name: string, shape: number[], fill: number): Tensor => ({
  name,
  datatype: 'FP32',
  shape,
  data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(fill),
});

function dataAddress(value: Ptr): bigint {
  const out: Out = [null];
  check(ortApi().GetTensorMutableData(value, out));
  return BigInt(koffi.address(out[0]));
}

describe('CUDA graph slots', () => {
  it('a slot per key: fixed device buffers the OrtValues point at, inputs copied in, outputs copied out', () => {
    const cuda = new FakeCudaRuntime();
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0));
    assert.equal(g.slot('k'), undefined, 'no slot before the learning run');
    g.create('k', [t('X', [2, 3], 0)], [t('Y', [2, 4], 0)]);
    const slot = g.slot('k');
    assert.ok(slot, 'a slot after it');
    assert.equal(slot.id, 0);
    const v = g.values(slot);
    assert.equal(dataAddress(v.inputs[0]!), slot.inputs[0]!.address, 'the input value sits on its buffer');
    assert.equal(dataAddress(v.outputs[0]!), slot.outputs[0]!.address, 'the output value sits on its buffer');
    const copies = cuda.hostCopies;
    g.upload(slot, [t('X', [2, 3], 1.5)]);
    const onDevice = cuda.deviceView(slot.inputs[0]!.address, 24);
    assert.deepEqual(
      [...new Float32Array(onDevice.buffer, onDevice.byteOffset, 6)],
      [1.5, 1.5, 1.5, 1.5, 1.5, 1.5],
      'the request input landed in the slot buffer',
    );
    // What a replay would write, then read back as a fresh host tensor.
    const out = cuda.deviceView(slot.outputs[0]!.address, 32);
    new Float32Array(out.buffer, out.byteOffset, 8).fill(7);
    const [y] = g.download(slot);
    assert.deepEqual([y!.name, y!.shape], ['Y', [2, 4]]);
    assert.deepEqual([...(y!.data as Float32Array)], new Array(8).fill(7));
    assert.equal(cuda.hostCopies, copies + 2, 'one copy in, one copy out');
    assert.equal(cuda.pinned.size, 1, 'outputs come out through one page-locked buffer');
    g.create('k2', [t('X', [4, 3], 0)], [t('Y', [4, 4], 0)]);
    assert.equal(g.slot('k2')?.id, 1, 'another shape, another graph id');
    g.release();
    assert.equal(cuda.openCount, 0, 'every device buffer freed once');
    assert.equal(cuda.pinned.size, 0, 'the page-locked buffer freed');
    g.release();
  });

  it('BAD INPUT - a request that does not match its slot is refused before any copy', () => {
    const cuda = new FakeCudaRuntime();
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0));
    g.create('k', [t('X', [2, 3], 0)], [t('Y', [2, 4], 0)]);
    const slot = g.slot('k')!;
    assert.throws(() => g.upload(slot, [t('X', [3, 3], 1)]), /does not match its buffer/);
    assert.throws(() => g.upload(slot, [t('Z', [2, 3], 1)]), /does not match its buffer/);
    assert.equal(cuda.hostCopies, 0);
    g.release();
  });

  it('strings, and shapes beyond the graph limit, run without a graph (null slot)', () => {
    const cuda = new FakeCudaRuntime();
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0));
    g.create('s', [{ name: 'S', datatype: 'BYTES', shape: [1], data: [new Uint8Array(1)] }], [t('Y', [1], 0)]);
    assert.equal(g.slot('s'), null);
    for (let i = 0; i < MAX_CUDA_GRAPHS; i++) g.create(`k${i}`, [t('X', [1, i + 1], 0)], [t('Y', [1], 0)]);
    assert.equal(g.slot(`k${MAX_CUDA_GRAPHS - 1}`)?.id, MAX_CUDA_GRAPHS - 1);
    g.create('over', [t('X', [1, 999], 0)], [t('Y', [1], 0)]);
    assert.equal(g.slot('over'), null);
    g.release();
    assert.equal(cuda.openCount, 0);
  });

  it('FAULT - a device allocation that fails frees what the slot had made and leaves no slot', () => {
    const cuda = new FakeCudaRuntime();
    let calls = 0;
    const malloc = cuda.malloc.bind(cuda);
    cuda.malloc = (device: number, bytes: number): bigint => {
      if (++calls === 2) throw new Error('cudaMalloc(32) failed: out of memory (CUDA error 2)');
      return malloc(device, bytes);
    };
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0));
    assert.throws(() => g.create('k', [t('X', [2, 3], 0)], [t('Y', [2, 4], 0)]), /out of memory/);
    assert.equal(g.slot('k'), undefined);
    assert.equal(cuda.openCount, 0, 'the first buffer was freed');
    g.release();
  });
  it('padding: a batch within a spec replays its batch-size slot, rows copied in and out, other shapes do not', () => {
    const cuda = new FakeCudaRuntime();
    const dims = new Map([
      ['A', [3]],
      ['B', [2]],
    ]);
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0), [
      { batchSize: 8, lowerBound: 5, dims },
      { batchSize: 4, lowerBound: 3, dims },
    ]);
    const batch = (n: number, fill: number, order: 'AB' | 'BA' = 'AB'): Tensor[] => {
      const a = t('A', [n, 3], fill);
      const b = t('B', [n, 2], fill + 1);
      return order === 'AB' ? [a, b] : [b, a];
    };
    assert.equal(g.padded(batch(6, 1), ['Y', 'Z']), undefined, 'nothing before the spec slot is made');
    // What warmUpGraphs makes: the spec's shapes in the session's input order, every output.
    g.create(CudaGraphs.key(batch(8, 0), ['Y', 'Z']), batch(8, 0), [t('Y', [8, 4], 0), t('Z', [8, 1], 0)]);
    for (const rows of [5, 6, 7, 8]) assert.equal(g.padded(batch(rows, 1, 'BA'), ['Y', 'Z'])?.rows, rows);
    assert.equal(g.padded(batch(4, 1), ['Y', 'Z']), undefined, 'the batch-4 spec has no slot yet');
    assert.equal(g.padded(batch(9, 1), ['Y', 'Z']), undefined, 'above every spec');
    assert.equal(g.padded([t('A', [6, 4], 1), t('B', [6, 2], 1)], ['Y', 'Z']), undefined, 'other non-batch dims');
    assert.equal(g.padded([t('A', [6, 3], 1)], ['Y', 'Z']), undefined, 'an input missing');
    const { slot, rows } = g.padded(batch(6, 2, 'BA'), ['Y', 'Z'])!;
    g.upload(slot, batch(6, 2, 'BA'), rows);
    const a = cuda.deviceView(slot.inputs[0]!.address, 8 * 3 * 4);
    const af = new Float32Array(a.buffer, a.byteOffset, 24);
    assert.deepEqual([...af.subarray(0, 18)], new Array(18).fill(2), 'six rows of A landed, by name');
    assert.deepEqual([...af.subarray(18)], new Array(6).fill(0), 'the padding rows kept what was there');
    const y = cuda.deviceView(slot.outputs[0]!.address, 8 * 4 * 4);
    new Float32Array(y.buffer, y.byteOffset, 32).forEach((_, i, arr) => (arr[i] = i));
    const [out] = g.download(slot, rows, ['Y']);
    assert.deepEqual(out!.shape, [6, 4], 'only the batch rows come back');
    assert.deepEqual([...(out!.data as Float32Array)], [...new Array(24).keys()]);
    assert.notEqual(
      (out!.data as Float32Array).buffer,
      [...cuda.pinned][0],
      'the output owns its memory (the staging is reused)',
    );
    assert.equal(g.download(slot, rows, ['Z', 'Y'])[0]!.name, 'Z', 'the requested outputs, in their order');
    assert.throws(() => g.upload(slot, batch(9, 1), 9), /does not match its buffer/, 'more rows than the slot');
    assert.throws(() => g.download(slot, rows, ['W']), /has no output 'W'/);
    g.release();
    assert.equal(cuda.openCount, 0);
    assert.equal(cuda.pinned.size, 0);
  });

  it('padding: a slot whose outputs lack the batch dimension is never padded', () => {
    const cuda = new FakeCudaRuntime();
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0), [
      { batchSize: 4, lowerBound: 1, dims: new Map([['A', [3]]]) },
    ]);
    g.create(CudaGraphs.key([t('A', [4, 3], 0)], ['Y']), [t('A', [4, 3], 0)], [t('Y', [3], 0)]);
    assert.equal(g.padded([t('A', [2, 3], 0)], ['Y']), undefined);
    g.release();
  });
  it('FAULT - without page-locked memory, outputs are copied straight into their own memory', () => {
    const cuda = new FakeCudaRuntime();
    cuda.mallocHost = (): Uint8Array => {
      throw new Error('cudaMallocHost(32) failed: out of memory (CUDA error 2)');
    };
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0));
    g.create('k', [t('X', [2, 3], 0)], [t('Y', [2, 4], 0)]);
    const slot = g.slot('k')!;
    const out = cuda.deviceView(slot.outputs[0]!.address, 32);
    new Float32Array(out.buffer, out.byteOffset, 8).fill(3);
    assert.deepEqual([...(g.download(slot)[0]!.data as Float32Array)], new Array(8).fill(3));
    assert.deepEqual([...(g.download(slot)[0]!.data as Float32Array)], new Array(8).fill(3), 'and again');
    g.release();
    assert.equal(cuda.openCount, 0);
  });
  it('outputs land in prefaulted memory of the slot size when the helper has one ready (rows of a padded batch)', async () => {
    const cuda = new FakeCudaRuntime();
    const dims = new Map([['A', [3]]]);
    const pre = new PrefaultedBuffers(2);
    const g = new CudaGraphs(cuda, 0, new CudaTensors(0), [{ batchSize: 8, lowerBound: 1, dims }], pre);
    g.create(CudaGraphs.key([t('A', [8, 3], 0)], ['Y']), [t('A', [8, 3], 0)], [t('Y', [8, 4], 0)]);
    const { slot } = g.padded([t('A', [3, 3], 1)], ['Y'])!;
    const dev = cuda.deviceView(slot.outputs[0]!.address, 8 * 4 * 4);
    new Float32Array(dev.buffer, dev.byteOffset, 32).forEach((_, i, a) => (a[i] = i));
    const first = g.download(slot, 3)[0]!.data as Float32Array;
    assert.equal(first.buffer.byteLength, 3 * 4 * 4, 'nothing ready yet: memory of the rows');
    let out: Float32Array | undefined;
    for (let i = 0; i < 200 && out?.buffer.byteLength !== 8 * 4 * 4; i++) {
      await new Promise((r) => setTimeout(r, 10));
      out = g.download(slot, 3)[0]!.data as Float32Array;
    }
    assert.equal(out!.buffer.byteLength, 8 * 4 * 4, "a prefaulted buffer of the slot's size");
    assert.deepEqual([...out!], [...new Array(12).keys()], 'holding the three rows');
    g.release();
    assert.equal(pre.take(128), undefined, 'released with the slots');
  });
});
