import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Requests in flight while their model is unloaded or reloaded finish; requests after that get a clear error.
 * Uses Triton's identity backend with a 300 ms execution so "in flight" is certain.
 */
const config = (maxBatch: number): string => `backend: "identity"
max_batch_size: ${maxBatch}
input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
instance_group [{ count: 2 kind: KIND_CPU }]
parameters { key: "execute_delay_ms" value { string_value: "300" } }
`;

async function infer(url: string): Promise<{ status: number; body: { error?: string; model_version?: string } }> {
  const res = await fetch(`${url}/v2/models/slow/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [5] }] }),
  });
  return { status: res.status, body: (await res.json()) as { error?: string } };
}

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

describe('Requests in flight during unload and reload', () => {
  let s: TestServer;
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'nereid-inflight-'));
    await mkdir(join(root, 'slow', '1'), { recursive: true });
    await writeFile(join(root, 'slow', 'config.pbtxt'), config(4));
    s = await startNereid({ repositories: [root], modelControlMode: 'explicit', loadModels: ['slow'] });
  });
  after(async () => {
    await s.close();
    await rm(root, { recursive: true, force: true });
  });

  it('an unload lets in-flight requests finish; new ones get 404', async () => {
    const inflight = [infer(s.url), infer(s.url)];
    await sleep(50);
    const unload = await post(`${s.url}/v2/repository/models/slow/unload`);
    assert.equal(unload.status, 200);
    const after = await infer(s.url);
    assert.equal(after.status, 404);
    assert.match(after.body.error ?? '', /unknown model: 'slow'/);
    for (const r of await Promise.all(inflight)) assert.equal(r.status, 200, JSON.stringify(r.body));
  });

  it('a reload swaps atomically: requests before it finish on the old load, requests during it are served', async () => {
    assert.equal((await post(`${s.url}/v2/repository/models/slow/load`)).status, 200);
    const before = [infer(s.url), infer(s.url)];
    await sleep(50);
    await writeFile(join(root, 'slow', 'config.pbtxt'), config(8));
    const reload = post(`${s.url}/v2/repository/models/slow/load`);
    const during = infer(s.url);
    assert.equal((await reload).status, 200);
    for (const r of await Promise.all([...before, during])) assert.equal(r.status, 200, JSON.stringify(r.body));
    const cfg = (await (await fetch(`${s.url}/v2/models/slow/config`)).json()) as { max_batch_size: number };
    assert.equal(cfg.max_batch_size, 8);
  });
});
