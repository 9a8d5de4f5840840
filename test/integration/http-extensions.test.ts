import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startNereid, type TestServer } from '../helpers/server.js';

interface Stat {
  count: number;
  ns: number;
}
interface ModelStats {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output', Stat>;
  batch_stats: { batch_size: number; compute_infer: Stat }[];
}

async function infer(url: string, batch: number): Promise<number> {
  const data = Array.from({ length: 16 * batch }, (_, i) => i % 7);
  const res = await fetch(`${url}/v2/models/simple/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [batch, 16], datatype: 'INT32', data },
        { name: 'INPUT1', shape: [batch, 16], datatype: 'INT32', data },
      ],
    }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe('HTTP statistics and repository index (real server)', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid();
  });
  after(() => s.close());

  it('counts requests, inferences (batch size n counts n), executions and batch sizes, with real durations', async () => {
    const before = Date.now();
    assert.equal(await infer(s.url, 1), 200);
    assert.equal(await infer(s.url, 3), 200);
    assert.equal(await infer(s.url, 3), 200);
    // A request that fails inside the backend path counts as a failure; a bad shape is rejected before it.
    const res = await fetch(`${s.url}/v2/models/simple/stats`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { model_stats: ModelStats[] };
    assert.equal(body.model_stats.length, 1);
    const st = body.model_stats[0];
    assert.equal(st.name, 'simple');
    assert.equal(st.version, '1');
    assert.equal(st.inference_stats.success.count, 3);
    assert.equal(st.inference_count, 7);
    assert.equal(st.execution_count, 3);
    assert.ok(st.last_inference >= before, 'last_inference is a recent epoch in ms');
    for (const k of ['success', 'queue', 'compute_input', 'compute_infer', 'compute_output'] as const) {
      assert.equal(st.inference_stats[k].count, 3, k);
      assert.ok(st.inference_stats[k].ns > 0, `${k} ns measured`);
    }
    assert.ok(st.inference_stats.success.ns >= st.inference_stats.compute_infer.ns);
    assert.deepEqual(
      st.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]),
      [
        [1, 1],
        [3, 2],
      ],
    );
  });

  it('lists every model and version at /v2/models/stats', async () => {
    const body = (await (await fetch(`${s.url}/v2/models/stats`)).json()) as { model_stats: ModelStats[] };
    assert.deepEqual(body.model_stats.map((m) => m.name).sort(), ['classifier', 'simple', 'text_encoder']);
  });

  it('BAD CALL - stats for an unknown model or version are 404', async () => {
    assert.equal((await fetch(`${s.url}/v2/models/nope/stats`)).status, 404);
    assert.equal((await fetch(`${s.url}/v2/models/simple/versions/9/stats`)).status, 404);
  });

  it('indexes the repository, with the ready filter', async () => {
    const all = await fetch(`${s.url}/v2/repository/index`, { method: 'POST' });
    assert.equal(all.status, 200);
    assert.deepEqual(await all.json(), [
      { name: 'classifier', version: '1', state: 'READY', reason: '' },
      { name: 'simple', version: '1', state: 'READY', reason: '' },
      { name: 'text_encoder', version: '1', state: 'READY', reason: '' },
    ]);
    const ready = await fetch(`${s.url}/v2/repository/index`, { method: 'POST', body: '{"ready": true}' });
    assert.equal(((await ready.json()) as unknown[]).length, 3);
  });

  it('BAD CALL - a non-boolean ready filter is 400, a repository name is 501', async () => {
    const r = await fetch(`${s.url}/v2/repository/index`, { method: 'POST', body: '{"ready": "yes"}' });
    assert.equal(r.status, 400);
    assert.match(((await r.json()) as { error: string }).error, /Invalid value for 'ready': expected a boolean/);
    const named = await fetch(`${s.url}/v2/repository/other/models/simple/load`, { method: 'POST' });
    assert.equal(named.status, 501);
  });
});
