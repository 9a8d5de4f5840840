import { errorFromData, errorToData } from '../core/errors.js';
import assert from 'node:assert/strict';
import { MessageChannel, receiveMessageOnPort } from 'node:worker_threads';
import { describe, it } from 'node:test';
import { CancelledError, InternalError, NereidError, NotFoundError } from '../core/errors.js';
import type { InferRequest, InferResponse } from '../core/inference.js';
import {
  Arena,
  ARENA_MAX_BYTES,
  packInfer,
  packResult,
  Tag,
  unpackInfer,
  unpackResult,
  type InferMessage,
  type ResultMessage,
} from './wire.js';

/** Sends `msg` through a real MessagePort (structured clone + transfer) and returns what arrives. */
function cross<T>(msg: T, transfer: ArrayBuffer[]): T {
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(msg, transfer);
  const got = receiveMessageOnPort(port2)?.message as T;
  port1.close();
  return got;
}

/** A message packed against `arena` crossing with the arena's buffer, as outbox.ts posts it. */
function crossWithArena<T>(msg: T, transfer: ArrayBuffer[], arena: Arena): [T, ArrayBuffer | undefined] {
  const buffer = arena.empty ? undefined : arena.take();
  return cross([msg, buffer] as [T, ArrayBuffer | undefined], buffer ? [buffer, ...transfer] : transfer);
}

const big = (n: number): number => ARENA_MAX_BYTES / 4 + n;

describe('front-end wire', () => {
  it("moves small tensors in the arena and leaves the sender's buffers as they were", () => {
    const body = new Uint8Array(256);
    const a = new Int32Array(body.buffer, 0, 16).fill(7);
    const b = new Int32Array(body.buffer, 64, 16).fill(9);
    const own = BigInt64Array.from([2n ** 63n - 1n, -(2n ** 63n)]);
    const request: InferRequest = {
      model: 'm',
      version: '2',
      id: 'r1',
      parameters: { priority: 1, big: 2n ** 60n },
      outputs: [{ name: 'O', classCount: 2 }],
      inputs: [
        { name: 'A', datatype: 'INT32', shape: [1, 16], data: a },
        { name: 'B', datatype: 'INT32', shape: [1, 16], data: b, parameters: { p: 'x' } },
        { name: 'C', datatype: 'INT64', shape: [2], data: own },
        { name: 'S', datatype: 'BYTES', shape: [2], data: [Buffer.from('hé'), new Uint8Array(0)] },
      ],
    };
    const arena = new Arena();
    const { msg, transfer } = packInfer(5, 3, 11, 0, request, arena);
    assert.equal(transfer.length, 0, 'nothing but the arena crosses');
    const [arrived, buffer] = crossWithArena<InferMessage>(msg, transfer, arena);
    const got = unpackInfer(arrived, buffer);
    assert.equal(own.length, 2, 'small tensors are copied, the sender keeps its buffers');
    assert.equal(body.byteLength, 256);
    assert.deepEqual(got.parameters, { priority: 1, big: 2n ** 60n });
    assert.deepEqual(got.outputs, [{ name: 'O', classCount: 2 }]);
    assert.equal(got.model, 'm');
    assert.equal(got.version, '2');
    assert.equal(got.id, 'r1');
    assert.deepEqual([...(got.inputs[0].data as Int32Array)], Array(16).fill(7));
    assert.deepEqual([...(got.inputs[1].data as Int32Array)], Array(16).fill(9));
    assert.deepEqual(got.inputs[1].parameters, { p: 'x' });
    assert.deepEqual([...(got.inputs[2].data as BigInt64Array)], [2n ** 63n - 1n, -(2n ** 63n)]);
    assert.equal((got.inputs[2].data as BigInt64Array).buffer, buffer, 'a view into the arena, aligned for 64 bits');
    const s = got.inputs[3].data as Uint8Array[];
    assert.deepEqual(
      s.map((e) => Buffer.from(e).toString()),
      ['hé', ''],
    );
  });

  it('transfers a large tensor that owns its buffer and copies a large view once', () => {
    const owned = new Float32Array(big(1)).fill(2.5);
    const shared = new Int32Array(big(8) * 2);
    const view = shared.subarray(0, big(8)).fill(3);
    const arena = new Arena();
    const { msg, transfer } = packInfer(
      1,
      0,
      0,
      0,
      {
        model: 'm',
        inputs: [
          { name: 'X', datatype: 'FP32', shape: [owned.length], data: owned },
          { name: 'Y', datatype: 'INT32', shape: [view.length], data: view },
        ],
      },
      arena,
    );
    assert.ok(arena.empty);
    assert.equal(transfer.length, 2);
    assert.ok(!transfer.includes(shared.buffer as ArrayBuffer), 'the shared buffer is not detached');
    const [arrived, buffer] = crossWithArena<InferMessage>(msg, transfer, arena);
    const got = unpackInfer(arrived, buffer);
    assert.equal(owned.length, 0, 'moved, not copied');
    assert.equal(shared.length, big(8) * 2, 'still usable by its other users');
    assert.ok((got.inputs[0].data as Float32Array).every((v) => v === 2.5));
    assert.ok((got.inputs[1].data as Int32Array).every((v) => v === 3));
  });

  it('moves a response across and leaves the views of a shared batch allocation intact', () => {
    const batch = new Float32Array(8).fill(1.5);
    const response: InferResponse = {
      model: 'm',
      version: '1',
      outputs: [
        { name: 'Y', datatype: 'FP32', shape: [1, 4], data: batch.subarray(0, 4) },
        { name: 'U', datatype: 'UINT64', shape: [1], data: BigUint64Array.from([2n ** 64n - 1n]) },
      ],
    };
    const arena = new Arena();
    const { msg, transfer } = packResult(9, true, response, arena);
    const [arrived, buffer] = crossWithArena<ResultMessage>(msg, transfer, arena);
    assert.equal(arrived[2], true);
    const got = unpackResult(arrived, buffer);
    assert.equal(batch.length, 8, 'the batch allocation still serves the other requests of the batch');
    assert.deepEqual([...(got.outputs[0].data as Float32Array)], [1.5, 1.5, 1.5, 1.5]);
    assert.deepEqual([...(got.outputs[1].data as BigUint64Array)], [2n ** 64n - 1n]);
    assert.equal(got.id, undefined);
  });

  it('carries shared-memory references without data, and a decoupled response as PARTIAL', () => {
    const ref = { region: 'r0', offset: 2n ** 40n, byteSize: 64n };
    const arena = new Arena();
    const { msg } = packInfer(
      7,
      0,
      0,
      1,
      {
        model: 'm',
        outputs: [{ name: 'O', sharedMemory: { region: 'r1', offset: 0n, byteSize: 16n } }],
        inputs: [
          { name: 'A', datatype: 'BYTES', shape: [3], data: new Uint8Array(0), sharedMemory: ref },
          { name: 'B', datatype: 'INT32', shape: [1], data: Int32Array.of(5) },
        ],
      },
      arena,
    );
    const [arrived, buffer] = crossWithArena<InferMessage>(msg, [], arena);
    assert.equal(arrived[4], 1, 'flags cross');
    const got = unpackInfer(arrived, buffer);
    assert.deepEqual(got.inputs[0].sharedMemory, ref);
    assert.equal((got.inputs[0].data as Uint8Array).byteLength, 0, 'a BYTES input in a region is not decoded here');
    assert.deepEqual([...(got.inputs[1].data as Int32Array)], [5]);
    assert.deepEqual(got.outputs?.[0].sharedMemory, { region: 'r1', offset: 0n, byteSize: 16n });

    const outArena = new Arena();
    const response: InferResponse = {
      model: 'm',
      version: '1',
      outputs: [{ name: 'O', datatype: 'BYTES', shape: [2], data: new Uint8Array(0), sharedMemory: ref }],
    };
    const packed = packResult(7, false, response, outArena, Tag.PARTIAL);
    assert.equal(packed.msg[0], Tag.PARTIAL);
    const [back, outBuffer] = crossWithArena<ResultMessage>(packed.msg, packed.transfer, outArena);
    const r = unpackResult(back, outBuffer);
    assert.deepEqual(r.outputs[0].sharedMemory, ref);
    assert.equal((r.outputs[0].data as Uint8Array).byteLength, 0);
  });

  it('keeps a SharedArrayBuffer tensor shared instead of copying it', () => {
    const shared = new Int32Array(new SharedArrayBuffer(16));
    const arena = new Arena();
    const { msg, transfer } = packInfer(
      1,
      0,
      0,
      0,
      { model: 'm', inputs: [{ name: 'A', datatype: 'INT32', shape: [4], data: shared }] },
      arena,
    );
    assert.equal(transfer.length, 0);
    const [arrived, buffer] = crossWithArena<InferMessage>(msg, transfer, arena);
    const got = unpackInfer(arrived, buffer);
    (got.inputs[0].data as Int32Array)[0] = 42;
    assert.equal(shared[0], 42);
  });

  it('keeps the error class, code and message; an unexpected error stays unexpected with its cause', () => {
    const nf = errorFromData(cross(errorToData(new NotFoundError('no model')), []));
    assert.ok(nf instanceof NotFoundError);
    assert.equal(nf.code, 'NOT_FOUND');
    assert.equal(nf.message, 'no model');
    assert.equal(nf.unexpected, false);

    const bug = errorFromData(cross(errorToData(new TypeError('x is undefined')), []));
    assert.ok(bug instanceof InternalError);
    assert.equal(bug.unexpected, true);
    assert.equal((bug.cause as Error).name, 'TypeError');
    assert.match((bug.cause as Error).stack ?? '', /x is undefined/);

    const aborted = errorFromData(errorToData(new DOMException('gone', 'AbortError')));
    assert.ok(aborted instanceof CancelledError);
    assert.ok(NereidError.from(aborted) === aborted);
  });
});
