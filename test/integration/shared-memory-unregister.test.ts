import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, int32Of } from '../helpers/grpc.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * Unregistering a system shared-memory region while a request uses it, as Triton does (shared_memory_manager.cc:
 * UnregisterHelper only marks a region in use `awaiting_unregister`; GetMemoryInfo does not look at the mark): the
 * region stays listed, its name taken, and NEW requests may still use it until the last user is done; then it is
 * gone. REGRESSION (issue 22 item 13): Nereid answered those new requests 404.
 */

const tag = `nereid-shm-unreg-${process.pid}`;
const fileOf = (name: string): string => `/dev/shm/${tag}-${name}`;
const range16 = Array.from({ length: 16 }, (_, i) => i);
const ones16: number[] = Array(16).fill(1);
/** The slow model's execution: long beside the time its request takes to reach the model (it binds first). */
const DELAY_MS = 2500;

describe('Unregister while a request uses a region (Triton awaiting_unregister)', () => {
  let s: TestServer;
  let repo: string;
  let client: ReturnType<typeof inferenceClient>;
  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-shm-unreg-repo-'));
    await mkdir(join(repo, 'slow', '1'), { recursive: true });
    await writeFile(
      join(repo, 'slow', 'config.pbtxt'),
      `backend: "identity" max_batch_size: 0 input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }] output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }] instance_group [{ count: 1 kind: KIND_CPU }] parameters { key: "execute_delay_ms" value { string_value: "${DELAY_MS}" } }`,
    );
    s = await startNereid({ repositories: [EXAMPLES, repo], allowClientShm: true });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client.close();
    await s.close();
    await rm(repo, { recursive: true, force: true });
    for (const n of ['in', 'out', 'late']) await unlink(fileOf(n)).catch(() => undefined);
  });

  const status = async (): Promise<unknown[]> =>
    (await (await fetch(`${s.url}/v2/systemsharedmemory/status`)).json()) as unknown[];

  async function setUp(): Promise<void> {
    await writeFile(fileOf('in'), Buffer.from(new Int32Array(range16).buffer));
    await writeFile(fileOf('out'), Buffer.alloc(64));
    await writeFile(fileOf('late'), Buffer.alloc(64));
    for (const n of ['in', 'out', 'late']) {
      await callUnary(client, 'SystemSharedMemoryRegister', { name: n, key: `/${tag}-${n}`, byte_size: 64 });
    }
  }

  /** A slow request reading 'in' and writing 'out' from shared memory, over HTTP. */
  function slowRequest(): Promise<Response> {
    return fetch(`${s.url}/v2/models/slow/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [
          {
            name: 'INPUT0',
            shape: [16],
            datatype: 'INT32',
            parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64 },
          },
        ],
        outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'out', shared_memory_byte_size: 64 } }],
      }),
    });
  }

  /** `simple` with INPUT0 read from region 'in' (range16) and OUTPUT0 written to region 'late'. */
  const simpleOverShm = {
    http: (): Promise<Response> =>
      fetch(`${s.url}/v2/models/simple/infer`, {
        method: 'POST',
        body: JSON.stringify({
          inputs: [
            {
              name: 'INPUT0',
              shape: [1, 16],
              datatype: 'INT32',
              parameters: { shared_memory_region: 'in', shared_memory_byte_size: 64 },
            },
            { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: ones16 },
          ],
          outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'late', shared_memory_byte_size: 64 } }],
        }),
      }),
    grpc: (): Promise<unknown> =>
      callUnary(client, 'ModelInfer', {
        model_name: 'simple',
        inputs: [
          {
            name: 'INPUT0',
            datatype: 'INT32',
            shape: [1, 16],
            parameters: { shared_memory_region: { string_param: 'in' }, shared_memory_byte_size: { int64_param: 64 } },
          },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: ones16 } },
        ],
        outputs: [
          {
            name: 'OUTPUT0',
            parameters: {
              shared_memory_region: { string_param: 'late' },
              shared_memory_byte_size: { int64_param: 64 },
            },
          },
        ],
      }),
  };

  for (const proto of ['http', 'grpc'] as const) {
    it(`REGRESSION - ${proto}: after unregister-all, new requests still use a region in use until it is released`, async () => {
      await setUp();
      const running = slowRequest();
      await sleep(500); // the slow request has bound 'in' and 'out' and sits in the model for DELAY_MS
      if (proto === 'http') {
        assert.equal((await fetch(`${s.url}/v2/systemsharedmemory/unregister`, { method: 'POST' })).status, 200);
      } else {
        await callUnary(client, 'SystemSharedMemoryUnregister', {});
      }
      assert.equal((await status()).length, 2, "'in' and 'out' stay listed while in use; 'late' is gone");

      // A new request on the region being unregistered: served, as Triton serves it. Its output region 'late' was
      // free, so it is gone: register it again for the output.
      await callUnary(client, 'SystemSharedMemoryRegister', { name: 'late', key: `/${tag}-late`, byte_size: 64 });
      if (proto === 'http') {
        const res = await simpleOverShm.http();
        assert.equal(res.status, 200, await res.clone().text());
      } else {
        await simpleOverShm.grpc();
      }
      assert.deepEqual(
        int32Of(await readFile(fileOf('late'))),
        range16.map((i) => i + 1),
      );
      // Its name is still taken while in use.
      await assert.rejects(
        callUnary(client, 'SystemSharedMemoryRegister', { name: 'in', key: `/${tag}-in`, byte_size: 64 }),
        (err: grpc.ServiceError) => err.code === grpc.status.ALREADY_EXISTS,
      );

      const res = await running;
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(int32Of(await readFile(fileOf('out'))), range16);
      // Released by its last user: gone now, and a request naming it is 404 again.
      const names = ((await status()) as { name: string }[]).map((r) => r.name);
      assert.deepEqual(names, ['late']);
      const gone = await simpleOverShm.http();
      assert.equal(gone.status, 404);
      assert.match(((await gone.json()) as { error: string }).error, /Unable to find shared memory region: 'in'/);
      await callUnary(client, 'SystemSharedMemoryUnregister', {});
    });
  }
});
