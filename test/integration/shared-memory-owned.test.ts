import assert from 'node:assert/strict';
import { cp, link, mkdtemp, readdir, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { FIXTURES } from '../helpers/python-models.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * REGRESSION (issue 22 item 1): with --allow-client-shm a client could register the server's own /dev/shm segments
 * (the Python stubs' transport, `nereid_python_*`) and read or overwrite other requests' tensors. Registration must
 * refuse every segment the server or its children use, under its own name or any other (a hard link here).
 */

const tag = `nereid-owned-${process.pid}`;
const made: string[] = [];

describe('Client shared memory never reaches the server’s own segments', () => {
  let s: TestServer;
  let repo: string;
  let grpcClient: ReturnType<typeof inferenceClient>;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-owned-repo-'));
    await cp(join(FIXTURES, 'identity'), join(repo, 'identity'), { recursive: true });
    s = await startNereid({ repositories: [repo], allowClientShm: true });
    grpcClient = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    grpcClient.close();
    await s.close();
    await rm(repo, { recursive: true, force: true });
    for (const f of made) await unlink(f).catch(() => undefined);
  });

  const register = (name: string, key: string): Promise<Response> =>
    fetch(`${s.url}/v2/systemsharedmemory/region/${name}/register`, {
      method: 'POST',
      body: JSON.stringify({ key, byte_size: 64 }),
    });

  /** The stub's segments of this server: one host-written (inputs) and one child-written (outputs) at least. */
  async function serverSegments(): Promise<string[]> {
    const res = await fetch(`${s.url}/v2/models/identity/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'FP32', shape: [1, 16], data: Array(16).fill(1) }] }),
    });
    assert.equal(res.status, 200, await res.clone().text());
    const names = (await readdir('/dev/shm')).filter((n) => n.startsWith(`nereid_python_${process.pid}`));
    assert.ok(names.some((n) => n.endsWith('h0')) && names.some((n) => n.endsWith('c0')), names.join());
    return names;
  }

  async function refusedOverGrpc(key: string, message: RegExp): Promise<void> {
    await assert.rejects(
      callUnary(grpcClient, 'SystemSharedMemoryRegister', { name: 'stolen', key, byte_size: 64 }),
      (err: grpc.ServiceError) => err.code === grpc.status.INVALID_ARGUMENT && message.test(err.details),
    );
  }

  it('BAD CALL - the stub segments by their names: 400 / INVALID_ARGUMENT with Triton’s reserved-prefix message', async () => {
    for (const n of await serverSegments()) {
      for (const key of [n, `/${n}`]) {
        const res = await register('stolen', key);
        assert.equal(res.status, 400, key);
        assert.equal(
          ((await res.json()) as { error: string }).error,
          `cannot register shared memory region 'stolen' with key '${key}' as the key contains the reserved prefix 'nereid_python_'`,
        );
        await refusedOverGrpc(key, /reserved prefix 'nereid_python_'/);
      }
    }
    assert.deepEqual(await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json(), []);
  });

  it('BAD CALL - the same segments under another name (a hard link) are refused by identity', async () => {
    for (const n of await serverSegments()) {
      const alias = `${tag}-${n.slice(-2)}`;
      await link(`/dev/shm/${n}`, `/dev/shm/${alias}`);
      made.push(`/dev/shm/${alias}`);
      const res = await register('stolen', `/${alias}`);
      assert.equal(res.status, 400, alias);
      assert.match(((await res.json()) as { error: string }).error, /names shared memory that the server uses/);
      await refusedOverGrpc(`/${alias}`, /names shared memory that the server uses/);
    }
    assert.deepEqual(await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json(), []);
  });

  it('a client’s own object still registers, under two region names at once', async () => {
    const file = `/dev/shm/${tag}-mine`;
    await writeFile(file, Buffer.alloc(64));
    made.push(file);
    assert.equal((await register('mine', `/${tag}-mine`)).status, 200);
    await callUnary(grpcClient, 'SystemSharedMemoryRegister', { name: 'mine2', key: `/${tag}-mine`, byte_size: 64 });
    const status = (await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json()) as { name: string }[];
    assert.deepEqual(status.map((r) => r.name).sort(), ['mine', 'mine2']);
    await fetch(`${s.url}/v2/systemsharedmemory/unregister`, { method: 'POST' });
  });
});
