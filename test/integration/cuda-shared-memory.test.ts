import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, int32Of } from '../helpers/grpc.js';
import { FakeCudaRuntime } from '../helpers/fake-cudart.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Triton's CUDA shared-memory extension over HTTP and gRPC. On this machine (no GPU) the real loader finds no usable
 * CUDA: registration answers Triton's 400 "GPUs not supported" after the body was checked (base64, 64-byte handle,
 * fields). The request path (inputs read from, outputs written to device buffers; bounds; unregister) runs against
 * a TEST DOUBLE of libcudart (test/helpers/fake-cudart.ts); the real thing runs on the H200
 * (scripts/gpu/cudashm-on-device.sh, tritonclient's cuda_shared_memory flow).
 */

const post = (url: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(url, { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) });

async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: string }).error;
}

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');
const NOT_SUPPORTED = "failed to register CUDA shared memory region: 'c', GPUs not supported";

function rejectsWith(p: Promise<unknown>, code: grpc.status, details: RegExp): Promise<void> {
  return assert.rejects(p, (err: grpc.ServiceError) => {
    assert.equal(err.code, code, err.details);
    assert.match(err.details, details);
    return true;
  });
}

describe('CUDA shared memory without a GPU (--allow-client-shm)', () => {
  let s: TestServer;
  let client: grpc.Client;
  before(async () => {
    s = await startNereid({ allowClientShm: true });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client.close();
    await s.close();
  });

  it('HTTP register answers 400 with Triton\'s "GPUs not supported"; status stays empty', async () => {
    const res = await post(`${s.url}/v2/cudasharedmemory/region/c/register`, {
      raw_handle: { b64: b64(new Uint8Array(64)) },
      device_id: 0,
      byte_size: 64,
    });
    assert.equal(res.status, 400);
    assert.equal(await errorOf(res), NOT_SUPPORTED);
    assert.deepEqual(await (await fetch(`${s.url}/v2/cudasharedmemory/status`)).json(), []);
  });

  it('gRPC CudaSharedMemoryRegister answers INVALID_ARGUMENT with the same message', async () => {
    await rejectsWith(
      callUnary(client, 'CudaSharedMemoryRegister', {
        name: 'c',
        raw_handle: Buffer.alloc(64),
        device_id: 0,
        byte_size: 64,
      }),
      grpc.status.INVALID_ARGUMENT,
      /^failed to register CUDA shared memory region: 'c', GPUs not supported$/,
    );
    assert.deepEqual(await callUnary(client, 'CudaSharedMemoryStatus', {}), { regions: {} });
    assert.deepEqual(await callUnary(client, 'CudaSharedMemoryUnregister', {}), {});
  });

  it('BAD CALL - the body is checked first: bad base64, a handle of the wrong length, missing fields', async () => {
    const url = `${s.url}/v2/cudasharedmemory/region/c/register`;
    const cases: [unknown, RegExp][] = [
      [{ raw_handle: { b64: '!!not base64!!' }, device_id: 0, byte_size: 64 }, /'raw_handle' is not valid base64/],
      [{ raw_handle: { b64: 'QUJD=A==' }, device_id: 0, byte_size: 64 }, /'raw_handle' is not valid base64/],
      [
        { raw_handle: { b64: b64(new Uint8Array(63)) }, device_id: 0, byte_size: 64 },
        /^'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t$/,
      ],
      [
        { raw_handle: { b64: b64(new Uint8Array(65)) }, device_id: 0, byte_size: 64 },
        /must be a valid base64 encoded cudaIpcMemHandle_t/,
      ],
      [{ device_id: 0, byte_size: 64 }, /^Shared memory register request has no 'raw_handle' field$/],
      [{ raw_handle: 'AAAA', device_id: 0, byte_size: 64 }, /Unable to parse 'b64'/],
      [{ raw_handle: { b64: b64(new Uint8Array(64)) }, device_id: 0 }, /no 'byte_size' field/],
      [{ raw_handle: { b64: b64(new Uint8Array(64)) }, byte_size: 64 }, /no 'device_id' field/],
      [{ raw_handle: { b64: b64(new Uint8Array(64)) }, device_id: -1, byte_size: 64 }, /Unable to parse 'device_id'/],
    ];
    for (const [body, message] of cases) {
      const res = await post(url, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(await errorOf(res), message, JSON.stringify(body));
    }
    await rejectsWith(
      callUnary(client, 'CudaSharedMemoryRegister', {
        name: 'c',
        raw_handle: Buffer.alloc(16),
        device_id: 0,
        byte_size: 64,
      }),
      grpc.status.INVALID_ARGUMENT,
      /'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t/,
    );
    await rejectsWith(
      callUnary(client, 'CudaSharedMemoryRegister', {
        name: '',
        raw_handle: Buffer.alloc(64),
        device_id: 0,
        byte_size: 64,
      }),
      grpc.status.INVALID_ARGUMENT,
      /'region name' is necessary to register cuda shared memory region/,
    );
  });
});

describe('CUDA shared memory behind restricted APIs', () => {
  let s: TestServer;
  let client: grpc.Client;
  before(async () => {
    s = await startNereid({
      allowClientShm: true,
      httpRestrictedApi: ['shared-memory:admin-key=s3cret'],
      grpcRestrictedProtocol: ['shared-memory:admin-key=s3cret'],
    });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client.close();
    await s.close();
  });

  it('register, status and unregister need the header over HTTP (403) and gRPC (UNAVAILABLE)', async () => {
    const body = { raw_handle: { b64: b64(new Uint8Array(64)) }, device_id: 0, byte_size: 64 };
    for (const [method, path] of [
      ['POST', '/v2/cudasharedmemory/region/c/register'],
      ['POST', '/v2/cudasharedmemory/region/c/unregister'],
      ['POST', '/v2/cudasharedmemory/unregister'],
      ['GET', '/v2/cudasharedmemory/region/c/status'],
    ]) {
      const res = await fetch(s.url + path, { method, body: method === 'POST' ? JSON.stringify(body) : undefined });
      assert.equal(res.status, 403, path);
      assert.equal(await errorOf(res), "This API is restricted, expecting header 'admin-key'");
    }
    const ok = await post(`${s.url}/v2/cudasharedmemory/region/c/register`, body, { 'admin-key': 's3cret' });
    assert.equal(ok.status, 400, 'past the restriction: the no-GPU answer');
    assert.equal(await errorOf(ok), NOT_SUPPORTED);

    const request = { name: 'c', raw_handle: Buffer.alloc(64), device_id: 0, byte_size: 64 };
    for (const rpc of ['CudaSharedMemoryRegister', 'CudaSharedMemoryUnregister', 'CudaSharedMemoryStatus']) {
      await rejectsWith(
        callUnary(client, rpc, request),
        grpc.status.UNAVAILABLE,
        /This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'/,
      );
    }
    const md = new grpc.Metadata();
    md.set('triton-grpc-protocol-admin-key', 's3cret');
    await rejectsWith(
      callUnary(client, 'CudaSharedMemoryRegister', request, {}, md),
      grpc.status.INVALID_ARGUMENT,
      /GPUs not supported/,
    );
  });
});

describe('CUDA shared memory request path (TEST DOUBLE of libcudart: host buffers stand for device memory)', () => {
  let s: TestServer;
  let client: grpc.Client;
  const rt = new FakeCudaRuntime(2);
  const input = rt.allocate(1, 128); // INPUT0 at 0, INPUT1 at 64
  const output = rt.allocate(1, 128); // OUTPUT0 at 0, OUTPUT1 at 64
  before(async () => {
    s = await startNereid({ allowClientShm: true, cudaRuntime: () => rt });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    const in32 = new Int32Array(input.memory.buffer, input.memory.byteOffset, 32);
    for (let i = 0; i < 16; i++) {
      in32[i] = i;
      in32[16 + i] = 1;
    }
  });
  after(async () => {
    client.close();
    await s.close();
  });

  const shm = (region: string, offset: number, size = 64): object => ({
    parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: size },
  });
  const request = (inOffset1 = 64): object => ({
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', ...shm('in', 0) },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', ...shm('in', inOffset1) },
    ],
    outputs: [
      { name: 'OUTPUT0', ...shm('out', 0) },
      { name: 'OUTPUT1', ...shm('out', 64) },
    ],
  });

  it('registers over HTTP and gRPC, infers with inputs and outputs in device buffers, reads them back', async () => {
    const reg = await post(`${s.url}/v2/cudasharedmemory/region/in/register`, {
      raw_handle: { b64: b64(input.handle) },
      device_id: 1,
      byte_size: 128,
    });
    assert.equal(reg.status, 200, await reg.clone().text());
    await callUnary(client, 'CudaSharedMemoryRegister', {
      name: 'out',
      raw_handle: Buffer.from(output.handle),
      device_id: 1,
      byte_size: 128,
    });
    assert.deepEqual(await (await fetch(`${s.url}/v2/cudasharedmemory/status`)).json(), [
      { name: 'in', device_id: 1, byte_size: 128 },
      { name: 'out', device_id: 1, byte_size: 128 },
    ]);
    const st = await callUnary<{ regions: Record<string, { device_id: string; byte_size: string }> }>(
      client,
      'CudaSharedMemoryStatus',
      { name: 'out' },
    );
    assert.equal(String(st.regions.out.byte_size), '128');

    const res = await post(`${s.url}/v2/models/simple/infer`, request());
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { outputs: Record<string, unknown>[] };
    // As for system shared memory: the outputs carry no data, it is in the region.
    assert.deepEqual(body.outputs[1], { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] });
    const out32 = [...new Int32Array(output.memory.buffer, output.memory.byteOffset, 32)];
    assert.deepEqual(
      out32.slice(0, 16),
      Array.from({ length: 16 }, (_, i) => i + 1),
    );
    assert.deepEqual(
      out32.slice(16),
      Array.from({ length: 16 }, (_, i) => i - 1),
    );
  });

  it('gRPC ModelInfer reads and writes the same regions', async () => {
    output.memory.fill(0);
    const p = (region: string, offset: number): object => ({
      shared_memory_region: { string_param: region },
      shared_memory_offset: { int64_param: offset },
      shared_memory_byte_size: { int64_param: 64 },
    });
    const r = await callUnary<{ raw_output_contents: Buffer[]; outputs: { name: string }[] }>(client, 'ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: p('in', 0) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: p('in', 64) },
      ],
      outputs: [
        { name: 'OUTPUT0', parameters: p('out', 0) },
        { name: 'OUTPUT1', parameters: p('out', 64) },
      ],
    });
    assert.ok(
      (r.raw_output_contents ?? []).every((c) => c.length === 0),
      'no output bytes in the response',
    );
    assert.deepEqual(
      int32Of(output.memory.subarray(0, 64)),
      Array.from({ length: 16 }, (_, i) => i + 1),
    );
  });

  it('BAD CALL - a slice past the registered size is 400 before any copy; a too-small output slice is 400', async () => {
    const copies = rt.hostCopies;
    const res = await post(`${s.url}/v2/models/simple/infer`, request(65));
    assert.equal(res.status, 400);
    assert.match(await errorOf(res), /Invalid offset \+ byte size for shared memory region: 'in'/);
    assert.equal(rt.hostCopies, copies, 'nothing was copied for a refused request');
    const small = await post(`${s.url}/v2/models/simple/infer`, {
      ...request(),
      outputs: [{ name: 'OUTPUT0', ...shm('out', 0, 32) }],
    });
    assert.equal(small.status, 400);
    assert.match(await errorOf(small), /should be at least 64 bytes to hold the results/);
  });

  it('a region name is one namespace with system shared memory; unregister closes every handle', async () => {
    const dup = await post(`${s.url}/v2/cudasharedmemory/region/in/register`, {
      raw_handle: { b64: b64(input.handle) },
      device_id: 1,
      byte_size: 64,
    });
    assert.equal(dup.status, 400);
    assert.match(await errorOf(dup), /shared memory region 'in' already in manager/);
    const sys = await post(`${s.url}/v2/systemsharedmemory/region/in/register`, { key: '/whatever', byte_size: 64 });
    assert.match(await errorOf(sys), /shared memory region 'in' already in manager/);
    const wrongKind = await fetch(`${s.url}/v2/systemsharedmemory/region/in/status`);
    assert.equal(wrongKind.status, 404);

    assert.equal((await post(`${s.url}/v2/cudasharedmemory/region/in/unregister`)).status, 200);
    assert.equal(rt.openCount, 1);
    assert.deepEqual(await callUnary(client, 'CudaSharedMemoryUnregister', {}), {});
    assert.equal(rt.openCount, 0, 'every opened handle was closed');
    assert.deepEqual(await (await fetch(`${s.url}/v2/cudasharedmemory/status`)).json(), []);
    const gone = await post(`${s.url}/v2/models/simple/infer`, request());
    assert.equal(gone.status, 404);
    assert.match(await errorOf(gone), /Unable to find shared memory region: 'in'/);
  });
});
