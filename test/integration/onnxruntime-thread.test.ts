import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createLogger } from '../../src/core/logger.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';

/**
 * `--backend-config=onnxruntime,transport=thread`: each onnxruntime instance in a worker thread of its own that
 * calls Run itself (blocking only that thread). The same answers as the in-process transport, batching across
 * threads, a client's bad input answered, an unknown transport refused, and an unload with runs in flight.
 */

const threads = (): number => readdirSync('/proc/self/task').length;

async function inferSimple(
  url: string,
  a: number[],
  b: number[],
): Promise<{ status: number; body: { outputs: { data: number[] }[] } }> {
  const res = await fetch(`${url}/v2/models/simple/infer`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: b },
      ],
    }),
  });
  return { status: res.status, body: (await res.json()) as { outputs: { data: number[] }[] } };
}

describe('onnxruntime on the engine-thread transport', () => {
  let s: TestServer;
  let before0 = 0;
  before(async () => {
    before0 = threads();
    s = await startNereid({
      modelControlMode: 'explicit',
      loadModels: ['simple', 'text_encoder'],
      backendConfig: new Map([['onnxruntime', { transport: 'thread' }]]),
    });
  });
  after(async () => {
    await s.close();
  });

  it('answers as the in-process engine does, from engine threads of its own', async () => {
    const a = Array.from({ length: 16 }, (_, i) => i * 3 - 7);
    const b = Array.from({ length: 16 }, (_, i) => 100 - i);
    const r = await inferSimple(s.url, a, b);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(
      r.body.outputs[0].data,
      a.map((x, i) => x + b[i]),
    );
    assert.deepEqual(
      r.body.outputs[1].data,
      a.map((x, i) => x - b[i]),
    );
    // simple has 2 instances, text_encoder 2: a worker thread each (plus onnxruntime's own threads).
    assert.ok(threads() >= before0 + 4, `threads ${before0} -> ${threads()}`);
  });

  it('many concurrent requests each get their own answer (batched across the thread boundary)', async () => {
    const all = await Promise.all(
      Array.from({ length: 64 }, (_, k) =>
        inferSimple(
          s.url,
          Array.from({ length: 16 }, (_, i) => k * 100 + i),
          Array.from({ length: 16 }, () => k),
        ),
      ),
    );
    all.forEach((r, k) => {
      assert.equal(r.status, 200, JSON.stringify(r.body));
      assert.deepEqual(
        r.body.outputs[0].data,
        Array.from({ length: 16 }, (_, i) => k * 100 + i + k),
      );
    });
  });

  it('BAD INPUT - a wrong shape is answered 400 with the reason; the instance serves on', async () => {
    const res = await fetch(`${s.url}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify({
        inputs: [
          { name: 'INPUT0', datatype: 'INT32', shape: [1, 15], data: new Array(15).fill(1) },
          { name: 'INPUT1', datatype: 'INT32', shape: [1, 15], data: new Array(15).fill(1) },
        ],
      }),
    });
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /shape/);
    const ok = await inferSimple(s.url, new Array(16).fill(2), new Array(16).fill(1));
    assert.equal(ok.status, 200);
    assert.deepEqual(ok.body.outputs[0].data, new Array(16).fill(3));
  });

  it('FAULT - an unload while requests run: every request is answered, the threads go away', async () => {
    const withThreads = threads();
    const inflight = Array.from({ length: 16 }, () => inferSimple(s.url, new Array(16).fill(1), new Array(16).fill(1)));
    // Unload once the first answer is back: the others are in flight, queued, or not yet arrived.
    await Promise.race(inflight);
    const unload = await fetch(`${s.url}/v2/repository/models/simple/unload`, { method: 'POST', body: '{}' });
    assert.equal(unload.status, 200);
    const answers = await Promise.all(inflight);
    // Served (accepted before the unload), or Triton's answers for a model going or gone: 503 while it unloads,
    // 404 once it is not in the server any more. Never a hang or a 500.
    for (const r of answers) assert.ok([200, 404, 503].includes(r.status), JSON.stringify(r.body));
    assert.ok(
      answers.some((r) => r.status === 200),
      'requests accepted before the unload are served',
    );
    for (let i = 0; i < 50 && threads() > withThreads - 2; i++) await new Promise((r) => setTimeout(r, 50));
    assert.ok(threads() <= withThreads - 2, `engine threads end with the unload (${withThreads} -> ${threads()})`);
  });
});

describe('onnxruntime transport option', () => {
  it('BAD CONFIG - an unknown transport fails start-up (before any model loads) naming the choices', async () => {
    await assert.rejects(
      startNereid({
        modelControlMode: 'explicit',
        loadModels: [],
        backendConfig: new Map([['onnxruntime', { transport: 'carrier-pigeon' }]]),
      }),
      /onnxruntime,transport must be 'inprocess' or 'thread', got 'carrier-pigeon'/,
    );
  });
});

describe('onnxruntime engine threads log through the server', () => {
  it("an engine thread's warning reaches the server log, naming the model and instance", async () => {
    // simple with a graph_spec but no enable_cuda_graph: the engine warns at load, in its own thread.
    const repo = mkdtempSync(join(tmpdir(), 'nereid-thread-log-'));
    cpSync(join(EXAMPLES, 'simple'), join(repo, 'simple_spec'), { recursive: true });
    const cfg = join(repo, 'simple_spec', 'config.pbtxt');
    writeFileSync(
      cfg,
      readFileSync(cfg, 'utf8').replace('name: "simple"', 'name: "simple_spec"') +
        '\noptimization { cuda { graph_spec { batch_size: 4 } } }\ninstance_group [ { kind: KIND_CPU count: 1 } ]\n',
    );
    const logs: string[] = [];
    const s = await startNereid({
      repositories: [repo],
      logger: createLogger({ write: (l) => void logs.push(l) }),
      backendConfig: new Map([['onnxruntime', { transport: 'thread' }]]),
    });
    try {
      const r = await fetch(`${s.url}/v2/models/simple_spec/ready`);
      assert.equal(r.status, 200);
      const warned = logs
        .map((l) => JSON.parse(l) as { level: number; msg: string; model?: string; instance?: string })
        .filter((l) => /graph_spec has no effect/.test(l.msg));
      assert.equal(warned.length, 1, logs.join('\n'));
      assert.equal(warned[0]!.level, 40, 'a warning');
      assert.deepEqual([warned[0]!.model, warned[0]!.instance], ['simple_spec', 'simple_spec_0']);
    } finally {
      await s.close();
    }
  });
});
