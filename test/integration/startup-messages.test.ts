import assert from 'node:assert/strict';
import { once } from 'node:events';
import { cp, mkdtemp, rm, symlink } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/core/logger.js';
import { serve } from '../../src/serve.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { EXAMPLES, startNereid } from '../helpers/server.js';

/**
 * Issue 26 item 14: a port in use fails start-up at once naming its flag, before any model loads; a
 * default-max-batch-size of 0 says what it does; the same folder given twice is one repository; server metadata
 * lists the sequence and schedule_policy extensions (Triton's order).
 */

const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));
async function tempDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), 'nereid-startup-'));
  dirs.push(d);
  return d;
}

describe('a port in use', () => {
  let taken: ReturnType<typeof createServer>;
  let port: number;
  before(async () => {
    taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    port = (taken.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => taken.close(() => r())));

  it('BAD CALL - fails start-up naming the flag, before any model loads', async () => {
    const logs: string[] = [];
    const logger = createLogger({ write: (l) => logs.push(l) });
    const base = { repositories: [EXAMPLES], logger, metricsPort: 0, grpcPort: 0, grpcAddress: '127.0.0.1' };
    for (const [flag, opts] of [
      ['http-port', { httpPort: port, httpAddress: '127.0.0.1' }],
      ['grpc-port', { httpPort: 0, httpAddress: '127.0.0.1', grpcPort: port }],
      ['metrics-port', { httpPort: 0, httpAddress: '127.0.0.1', metricsPort: port, metricsAddress: '127.0.0.1' }],
    ] as const) {
      await assert.rejects(
        serve({ ...base, ...opts }),
        new RegExp(`--${flag}=${port}: 127\\.0\\.0\\.1:${port} is already in use .*give --${flag} another port`),
      );
    }
    assert.equal(logs.filter((l) => l.includes('"load":"begin"')).length, 0, 'no model started loading');
  });
});

describe('start-up messages', () => {
  it('default-max-batch-size=0 leaves batching off and says so, not "autofilled max_batch_size to 0"', async () => {
    const dir = await tempDir();
    await cp(join(EXAMPLES, 'simple', '1'), join(dir, 'auto', '1'), { recursive: true });
    const logs: string[] = [];
    const srv = await startNereid({
      repositories: [dir],
      backendConfig: new Map([['onnxruntime', { 'default-max-batch-size': '0' }]]),
      logger: createLogger({ write: (l) => logs.push(l) }),
      allowGrpc: false,
    });
    try {
      const cfg = (await (await fetch(`${srv.url}/v2/models/auto/config`)).json()) as {
        max_batch_size: number;
        input: { dims: number[] }[];
      };
      assert.equal(cfg.max_batch_size, 0);
      assert.deepEqual(cfg.input[0].dims, [-1, 16]);
      assert.equal(logs.filter((l) => l.includes('autofilled max_batch_size to 0')).length, 0);
      assert.equal(logs.filter((l) => l.includes('default-max-batch-size is 0: max_batch_size stays 0')).length, 1);
    } finally {
      await srv.close();
    }
  });

  it('the same folder given twice is one repository (its models load, not "in more than one repository")', async () => {
    const dir = await tempDir();
    await cp(join(EXAMPLES, 'simple'), join(dir, 'simple'), { recursive: true });
    const link = join(await tempDir(), 'models');
    await symlink(dir, link, 'dir');
    const srv = await startNereid({ repositories: [dir, `${dir}/`, link], allowGrpc: false });
    try {
      const index = (await (await fetch(`${srv.url}/v2/repository/index`, { method: 'POST' })).json()) as {
        name: string;
        state: string;
      }[];
      assert.deepEqual(
        index.map((m) => [m.name, m.state]),
        [['simple', 'READY']],
      );
    } finally {
      await srv.close();
    }
  });

  it("lists the sequence and schedule_policy extensions in Triton's order, over HTTP and gRPC", async () => {
    const srv = await startNereid();
    const client = inferenceClient(`127.0.0.1:${srv.grpcPort}`);
    try {
      const http = ((await (await fetch(`${srv.url}/v2`)).json()) as { extensions: string[] }).extensions;
      const grpc = (await callUnary<{ extensions: string[] }>(client, 'ServerMetadata', {})).extensions;
      for (const ext of [http, grpc]) {
        assert.ok(ext.includes('sequence') && ext.includes('schedule_policy'), ext.join(', '));
        assert.deepEqual(ext.slice(0, 5), [
          'classification',
          'sequence',
          'model_repository',
          'model_repository(unload_dependents)',
          'schedule_policy',
        ]);
      }
    } finally {
      client.close();
      await srv.close();
    }
  });
});
