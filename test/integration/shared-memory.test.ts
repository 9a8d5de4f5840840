import assert from 'node:assert/strict';
import { readFile, symlink, truncate, unlink, writeFile } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Triton's system shared memory over HTTP and gRPC on real /dev/shm objects: register, status, unregister, inputs
 * read from and outputs written to regions, Triton's bounds checks and messages, reserved and invalid keys, a region
 * shrunk under the server, and CUDA shared memory refused without a GPU. Unregister while a request uses a region:
 * shared-memory-unregister.test.ts; the server's own segments: shared-memory-owned.test.ts. tritonclient's own flows run in test/compat (test_shared_memory.py).
 */

const tag = `nereid-shm-${process.pid}`;
const keyOf = (name: string): string => `/${tag}-${name}`;
const fileOf = (name: string): string => `/dev/shm/${tag}-${name}`;
const created: string[] = [];

/** A shm object as shm_open + ftruncate would make it, with `bytes` at its start. */
async function createRegion(name: string, size: number, bytes?: Uint8Array): Promise<string> {
  const buf = Buffer.alloc(size);
  if (bytes) Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).copy(buf);
  await writeFile(fileOf(name), buf);
  created.push(fileOf(name));
  return keyOf(name);
}

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

async function errorOf(res: Response): Promise<string> {
  return ((await res.json()) as { error: string }).error;
}

const range16 = Array.from({ length: 16 }, (_, i) => i);
const ones16: number[] = Array(16).fill(1);

/** The `simple` request with inputs and outputs in regions in0, in1, out0, out1 (64 bytes each). */
function simpleShmRequest(extra: { out0?: Record<string, unknown>; in1?: Record<string, unknown> } = {}): object {
  const shm = (region: string, more: Record<string, unknown> = {}): object => ({
    parameters: { shared_memory_region: region, shared_memory_byte_size: 64, ...more },
  });
  return {
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', ...shm('in0') },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', ...shm('in1', extra.in1) },
    ],
    outputs: [
      { name: 'OUTPUT0', ...shm('out0', extra.out0) },
      { name: 'OUTPUT1', ...shm('out1') },
    ],
  };
}

after(async () => {
  for (const f of created) await unlink(f).catch(() => undefined);
});

describe('Client shared memory off (the default)', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid();
  });
  after(() => s.close());

  it('status answers with no regions; register and unregister are 501 with Triton message', async () => {
    const key = await createRegion('off', 64);
    assert.deepEqual(await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json(), []);
    for (const [path, body] of [
      ['/v2/systemsharedmemory/region/r/register', { key, byte_size: 64 }],
      ['/v2/systemsharedmemory/region/r/unregister', undefined],
      ['/v2/systemsharedmemory/unregister', undefined],
      ['/v2/cudasharedmemory/region/r/register', { raw_handle: { b64: '' }, device_id: 0, byte_size: 64 }],
    ] as const) {
      const res = await post(s.url + path, body);
      assert.equal(res.status, 501, path);
      assert.equal(
        await errorOf(res),
        "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.",
      );
    }
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      await assert.rejects(
        callUnary(client, 'SystemSharedMemoryRegister', { name: 'r', key, byte_size: 64 }),
        (err: grpc.ServiceError) => err.code === grpc.status.UNIMPLEMENTED && /disabled/.test(err.details),
      );
      const st = await callUnary<{ regions: object }>(client, 'SystemSharedMemoryStatus', {});
      assert.deepEqual(st.regions, {});
    } finally {
      client.close();
    }
  });

  it('a request naming a region gets 404: no region can exist', async () => {
    const res = await post(`${s.url}/v2/models/simple/infer`, simpleShmRequest());
    assert.equal(res.status, 404);
    assert.match(await errorOf(res), /Unable to find shared memory region: 'in0'/);
  });
});

describe('System shared memory (--allow-client-shm)', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({ allowClientShm: true });
  });
  after(() => s.close());

  const register = (name: string, key: string, byteSize: number, offset?: number): Promise<Response> =>
    post(`${s.url}/v2/systemsharedmemory/region/${name}/register`, { key, byte_size: byteSize, offset });
  const unregisterAll = (): Promise<Response> => post(`${s.url}/v2/systemsharedmemory/unregister`);

  async function setUpSimple(): Promise<void> {
    await unregisterAll();
    const regions: [string, Uint8Array | undefined][] = [
      ['in0', new Uint8Array(new Int32Array(range16).buffer)],
      ['in1', new Uint8Array(new Int32Array(ones16).buffer)],
      ['out0', undefined],
      ['out1', undefined],
    ];
    for (const [name, bytes] of regions) {
      const key = await createRegion(name, 64, bytes);
      assert.equal((await register(name, key, 64)).status, 200, name);
    }
  }

  it('HTTP: inputs are read from regions and outputs written into them; the response carries no data for them', async () => {
    await setUpSimple();
    const status = (await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json()) as { name: string }[];
    assert.deepEqual(status.map((r) => r.name).sort(), ['in0', 'in1', 'out0', 'out1']);
    const one = (await (await fetch(`${s.url}/v2/systemsharedmemory/region/in0/status`)).json()) as unknown[];
    assert.deepEqual(one, [{ name: 'in0', key: keyOf('in0'), offset: 0, byte_size: 64 }]);

    const res = await post(`${s.url}/v2/models/simple/infer`, simpleShmRequest());
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { outputs: Record<string, unknown>[] };
    assert.deepEqual(body.outputs[0], { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] });
    assert.deepEqual(
      int32Of(await readFile(fileOf('out0'))),
      range16.map((i) => i + 1),
    );
    assert.deepEqual(
      int32Of(await readFile(fileOf('out1'))),
      range16.map((i) => i - 1),
    );
  });

  it('gRPC: the same flow; raw_input_contents pair with the inputs not in shared memory', async () => {
    await setUpSimple();
    await writeFile(fileOf('out0'), Buffer.alloc(64));
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const shm = (region: string) => ({
        shared_memory_region: { string_param: region },
        shared_memory_byte_size: { int64_param: 64 },
      });
      const res = await callUnary<{ outputs: { name: string }[]; raw_output_contents: Buffer[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'simple',
          inputs: [
            { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shm('in0') },
            { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] },
          ],
          raw_input_contents: [int32Bytes(Array(16).fill(10))],
          outputs: [{ name: 'OUTPUT0', parameters: shm('out0') }, { name: 'OUTPUT1' }],
        },
      );
      assert.equal(res.raw_output_contents[0].length, 0, 'empty raw content for the output in shared memory');
      assert.deepEqual(
        int32Of(res.raw_output_contents[1]),
        range16.map((i) => i - 10),
      );
      assert.deepEqual(
        int32Of(await readFile(fileOf('out0'))),
        range16.map((i) => i + 10),
      );
      const st = await callUnary<{ regions: Record<string, { byte_size: string }> }>(
        client,
        'SystemSharedMemoryStatus',
        {
          name: 'in1',
        },
      );
      assert.equal(st.regions.in1.byte_size, '64');
      await callUnary(client, 'SystemSharedMemoryUnregister', { name: 'in1' });
      await assert.rejects(
        callUnary(client, 'SystemSharedMemoryStatus', { name: 'in1' }),
        (err: grpc.ServiceError) => err.code === grpc.status.NOT_FOUND,
      );
    } finally {
      client.close();
    }
  });

  it('BAD CALL - offsets and sizes out of bounds, with Triton messages', async () => {
    await setUpSimple();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ shared_memory_offset: 64 }, /Invalid offset for shared memory region: 'out0'/],
      [{ shared_memory_offset: 2 ** 64 - 32 }, /Invalid offset for shared memory region: 'out0'/],
      [{ shared_memory_offset: 1 }, /Invalid offset \+ byte size for shared memory region: 'out0'/],
      [{ shared_memory_offset: 32, shared_memory_byte_size: 2 ** 64 - 32 }, /Integer overflow detected: byte_size /],
      [{ shared_memory_offset: 16, shared_memory_byte_size: 32 }, /should be at least 64 bytes to hold the results/],
      [{ shared_memory_offset: -1 }, /Unable to parse 'shared_memory_offset'/],
    ];
    for (const [out0, message] of cases) {
      const res = await post(`${s.url}/v2/models/simple/infer`, simpleShmRequest({ out0 }));
      assert.equal(res.status, 400, JSON.stringify(out0));
      assert.match(await errorOf(res), message);
    }
    // An input region larger than the input: Triton's byte-size check.
    const big = await createRegion('big', 128);
    assert.equal((await register('big', big, 128)).status, 200);
    const res = await post(
      `${s.url}/v2/models/simple/infer`,
      simpleShmRequest({ in1: { shared_memory_region: 'big', shared_memory_byte_size: 128 } }),
    );
    assert.match(
      await errorOf(res),
      /input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128/,
    );
  });

  it('BAD CALL - registration past the object, twice, reserved and invalid keys, paths and symlinks are refused', async () => {
    await unregisterAll();
    const key = await createRegion('reg', 64);
    for (const [byteSize, offset] of [
      [65, 0],
      [64, 1],
      [1, 64],
      [0, 65],
    ]) {
      const res = await register('r', key, byteSize, offset);
      assert.equal(res.status, 400);
      assert.equal(await errorOf(res), "failed to register shared memory region 'r': invalid args");
    }
    assert.equal((await register('r', key, 64)).status, 200);
    const again = await register('r', key, 64);
    assert.equal(again.status, 400);
    assert.equal(await errorOf(again), "shared memory region 'r' already in manager");

    const reserved = 'triton_python_backend_shm_region_';
    for (const k of [`${reserved}_x`, `/${reserved}_x`, `///${reserved}_x`]) {
      const res = await register('my_test_shm_name', k, 16);
      assert.equal(res.status, 400, k);
      assert.equal(
        await errorOf(res),
        `cannot register shared memory region 'my_test_shm_name' with key '${k}' as the key contains the reserved prefix '${reserved}'`,
      );
    }
    for (const k of ['/', '///']) {
      const res = await register('my_test_shm_name', k, 16);
      assert.equal(
        await errorOf(res),
        `cannot register shared memory region 'my_test_shm_name' - invalid shm key '${k}'`,
      );
    }
    // Keys are shm names, never paths; a symlink in /dev/shm is not followed; a key that does not open is Triton's
    // INTERNAL (500).
    await symlink('/etc/passwd', fileOf('link'));
    created.push(fileOf('link'));
    for (const k of ['/../../etc/passwd', '/a/b', keyOf('link'), keyOf('missing'), '/..']) {
      const res = await register('p', k, 1);
      assert.equal(res.status, 500, k);
      // (A key that looks like an absolute path is shown by its last segment: no server path in answers.)
      assert.match(await errorOf(res), /^Unable to open shared memory region: '/, k);
    }
    await unregisterAll();
  });

  it('REGRESSION-style fault: a region the client shrank after registering is a 400, not a crash', async () => {
    await setUpSimple();
    await truncate(fileOf('in0'), 8);
    const res = await post(`${s.url}/v2/models/simple/infer`, simpleShmRequest());
    assert.equal(res.status, 400);
    assert.match(await errorOf(res), /holds fewer bytes than were registered/);
    await truncate(fileOf('in0'), 64);
    await truncate(fileOf('out1'), 8);
    const out = await post(`${s.url}/v2/models/simple/infer`, simpleShmRequest());
    assert.equal(out.status, 400);
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });

  it('BAD CALL - an input sets one source only; an output in shared memory is not also classified or binary', async () => {
    await setUpSimple();
    const inputs = (p: Record<string, unknown>, data?: number[]) => [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data, parameters: p },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: ones16 },
    ];
    let res = await post(`${s.url}/v2/models/simple/infer`, {
      inputs: inputs({ shared_memory_region: 'in0', shared_memory_byte_size: 64 }, range16),
    });
    assert.equal(
      await errorOf(res),
      "Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' 'shared_memory_region'",
    );
    res = await post(`${s.url}/v2/models/simple/infer`, { inputs: inputs({}) });
    assert.match(await errorOf(res), /But no field is set/);
    for (const [p, m] of [
      [{ classification: 2 }, /can't set both 'shared_memory_region' and 'classification'/],
      [{ binary_data: true }, /can't set both 'shared_memory_region' and 'binary_data'/],
    ] as const) {
      res = await post(`${s.url}/v2/models/simple/infer`, {
        inputs: inputs({}, range16),
        outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out0', shared_memory_byte_size: 64, ...p } }],
      });
      assert.equal(res.status, 400);
      assert.match(await errorOf(res), m);
    }
  });

  it('CUDA shared memory: status is empty, registering is 400 "GPUs not supported", unregistering is fine', async () => {
    assert.deepEqual(await (await fetch(`${s.url}/v2/cudasharedmemory/status`)).json(), []);
    const res = await post(`${s.url}/v2/cudasharedmemory/region/c/register`, {
      raw_handle: { b64: Buffer.alloc(64).toString('base64') },
      device_id: 0,
      byte_size: 64,
    });
    assert.equal(res.status, 400);
    assert.match(await errorOf(res), /failed to register CUDA shared memory region: 'c', GPUs not supported/);
    assert.equal((await post(`${s.url}/v2/cudasharedmemory/unregister`)).status, 200);
    const missing = await fetch(`${s.url}/v2/cudasharedmemory/region/c/status`);
    assert.equal(missing.status, 404);
    assert.match(await errorOf(missing), /Unable to find cuda shared memory region: 'c'/);
  });
});
