import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startNereid, type TestServer } from '../helpers/server.js';

const post = (url: string, body: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: JSON.stringify(body) });

async function inferSimple(url: string, id: string): Promise<number> {
  const data = Array.from({ length: 16 }, (_, i) => i);
  const res = await post(`${url}/v2/models/simple/infer`, {
    id,
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data },
    ],
  });
  await res.arrayBuffer();
  return res.status;
}

describe('Logging extension', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid();
  });
  after(() => s.close());

  it('reports the settings and applies a partial update', async () => {
    const before = (await (await fetch(`${s.url}/v2/logging`)).json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(before).sort(), [
      'log_error',
      'log_file',
      'log_format',
      'log_info',
      'log_verbose_level',
      'log_warning',
    ]);
    const res = await post(`${s.url}/v2/logging`, { log_verbose_level: 1, log_format: 'ISO8601' });
    assert.equal(res.status, 200);
    const after = (await res.json()) as Record<string, unknown>;
    assert.equal(after.log_verbose_level, 1);
    assert.equal(after.log_format, 'ISO8601');
    assert.equal(after.log_info, before.log_info, 'untouched keys keep their value');
    await post(`${s.url}/v2/logging`, { log_verbose_level: 0, log_format: 'default' });
  });

  it('BAD CALL - log_file cannot be changed over the network (501)', async () => {
    const res = await post(`${s.url}/v2/logging`, { log_file: '/tmp/evil.log' });
    assert.equal(res.status, 501);
    assert.match(
      ((await res.json()) as { error: string }).error,
      /log file location can not be updated through network protocol/,
    );
  });

  it('BAD CALL - wrong types and unknown keys are 400 and change nothing', async () => {
    assert.equal((await post(`${s.url}/v2/logging`, { log_warning: true })).status, 200);
    for (const body of [{ log_info: 'yes' }, { log_verbose_level: -1 }, { log_format: 'xml' }, { log_colour: true }]) {
      const res = await post(`${s.url}/v2/logging`, { log_warning: false, ...body });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    const now = (await (await fetch(`${s.url}/v2/logging`)).json()) as { log_warning: boolean };
    assert.equal(now.log_warning, true, 'a rejected update applies none of its keys');
  });
});

describe('Trace extension', () => {
  let s: TestServer;
  let dir: string;
  let file: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nereid-trace-'));
    file = join(dir, 'trace.json');
    s = await startNereid({ trace: { file } });
  });
  after(async () => {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('is off by default and reports Triton’s keys', async () => {
    const st = (await (await fetch(`${s.url}/v2/trace/setting`)).json()) as Record<string, unknown>;
    assert.deepEqual(st.trace_level, ['OFF']);
    assert.equal(st.trace_rate, '1000');
    assert.equal(st.trace_count, '-1');
    assert.equal(st.trace_file, file);
  });

  it('writes TIMESTAMPS records for one request in trace_rate, at most trace_count, per model', async () => {
    const res = await post(`${s.url}/v2/models/simple/trace/setting`, {
      trace_level: ['TIMESTAMPS'],
      trace_rate: '2',
      trace_count: '2',
    });
    assert.equal(res.status, 200);
    for (let i = 0; i < 6; i++) assert.equal(await inferSimple(s.url, `r${i}`), 200);
    const global = (await (await fetch(`${s.url}/v2/trace/setting`)).json()) as { trace_level: string[] };
    assert.deepEqual(global.trace_level, ['OFF'], 'the model override does not change the global setting');
    await s.close();
    const records = JSON.parse(await readFile(file, 'utf8')) as {
      id: number;
      request_id?: string;
      timestamps?: { name: string; ns: number }[];
    }[];
    const heads = records.filter((r) => r.timestamps === undefined);
    assert.deepEqual(
      heads.map((h) => h.request_id),
      ['r0', 'r2'],
      'requests 1 and 3 of rate 2, then the count of 2 is spent',
    );
    const ts = records.find((r) => r.timestamps)?.timestamps ?? [];
    assert.deepEqual(
      ts.map((t) => t.name),
      [
        'REQUEST_START',
        'QUEUE_START',
        'COMPUTE_START',
        'COMPUTE_INPUT_END',
        'COMPUTE_OUTPUT_START',
        'COMPUTE_END',
        'REQUEST_END',
      ],
    );
    for (let i = 1; i < ts.length; i++) assert.ok(ts[i].ns >= ts[i - 1].ns, 'timestamps are ordered');
  });

  it('BAD CALL - trace_file over the network is 501; bad values are 400', async () => {
    const s2 = await startNereid({ trace: { file } });
    try {
      assert.equal((await post(`${s2.url}/v2/trace/setting`, { trace_file: '/tmp/x' })).status, 501);
      assert.equal((await post(`${s2.url}/v2/trace/setting`, { trace_rate: 'fast' })).status, 400);
      assert.equal((await post(`${s2.url}/v2/trace/setting`, { trace_level: ['LOUD'] })).status, 400);
      assert.equal((await post(`${s2.url}/v2/trace/setting`, { trace_colour: '1' })).status, 400);
      assert.equal((await post(`${s2.url}/v2/models/nope/trace/setting`, { trace_rate: '1' })).status, 404);
    } finally {
      await s2.close();
    }
  });
});
