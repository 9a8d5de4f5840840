import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { NereidGrpcClient } from '../../src/client/grpc.js';
import { NereidHttpClient } from '../../src/client/http.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Triton's rate limiter (`--rate-limit=execution_count`) against the real server: identity models with a delay
 * whose executions the server's trace records (COMPUTE_START..COMPUTE_END, from the engine's own compute time).
 * Overlap and order are read from those records, never from wall-clock bounds.
 */

const identity = (group: string, delayMs: number): string => `backend: "identity" max_batch_size: 0
  input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
  output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
  instance_group [{ kind: KIND_CPU ${group} }]
  parameters { key: "execute_delay_ms" value { string_value: "${delayMs}" } }`;
const limiter = (resources: string, priority = 1): string =>
  `rate_limiter { resources [ ${resources} ] priority: ${priority} }`;

async function repository(models: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'nereid-ratelimit-'));
  for (const [name, config] of Object.entries(models)) {
    await mkdir(join(dir, name, '1'), { recursive: true });
    await writeFile(join(dir, name, 'config.pbtxt'), config);
  }
  return dir;
}

interface Execution {
  model: string;
  queued: number;
  start: number;
  end: number;
}

/** The trace file's requests as executions (every request is traced: rate 1). */
async function executions(file: string): Promise<Execution[]> {
  const records = JSON.parse(await readFile(file, 'utf8')) as {
    id: number;
    model_name?: string;
    timestamps?: { name: string; ns: number }[];
  }[];
  const models = new Map(records.filter((r) => r.model_name).map((r) => [r.id, r.model_name as string]));
  return records
    .filter((r) => r.timestamps)
    .map((r) => {
      const at = (name: string): number => r.timestamps?.find((t) => t.name === name)?.ns as number;
      return {
        model: models.get(r.id) as string,
        queued: at('QUEUE_START'),
        start: at('COMPUTE_START'),
        end: at('COMPUTE_END'),
      };
    })
    .sort((a, b) => a.start - b.start);
}

function overlaps(runs: readonly Execution[]): number {
  let n = 0;
  let end = -Infinity;
  for (const r of runs) {
    if (r.start < end) n++;
    end = Math.max(end, r.end);
  }
  return n;
}

const MAIN = fileURLToPath(new URL('../../src/cli/main.ts', import.meta.url));

/** `nereid serve <args>` to its exit: code and stderr. */
async function serveExit(args: string[]): Promise<{ code: number; stderr: string }> {
  const ports = ['--http-port=0', '--http-address=127.0.0.1', '--grpc-port=0', '--metrics-port=0'];
  try {
    await promisify(execFile)(process.execPath, ['--import', 'tsx', MAIN, 'serve', ...ports, ...args], {
      timeout: 60_000,
    });
    return { code: 0, stderr: '' };
  } catch (err) {
    const e = err as { code: number; stderr: string };
    return { code: e.code, stderr: e.stderr };
  }
}

const input = (v: number) => [{ name: 'INPUT0', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(v) }];

describe('rate limiter', () => {
  let dir: string;
  const servers: TestServer[] = [];
  const start = async (opts: Parameters<typeof startNereid>[0]): Promise<TestServer> => {
    const s = await startNereid(opts);
    servers.push(s);
    return s;
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nereid-ratelimit-trace-'));
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await rm(dir, { recursive: true, force: true });
  });

  /** Four requests to each of two models sharing resource R (count 1), one over HTTP, one over gRPC. */
  async function sharedResourceRun(mode: 'off' | 'execution_count', file: string): Promise<Execution[]> {
    const shared = limiter('{ name: "R" count: 1 }');
    const repo = await repository({
      a: identity(`count: 2 ${shared}`, 60),
      b: identity(`count: 2 ${shared}`, 60),
    });
    const s = await start({
      repositories: [repo],
      rateLimit: { mode },
      trace: { file, level: 'TIMESTAMPS', rate: 1 },
    });
    const http = new NereidHttpClient({ url: s.url });
    const grpc = new NereidGrpcClient({ address: `127.0.0.1:${s.grpcPort}` });
    try {
      const results = await Promise.all([
        ...[1, 2, 3, 4].map((v) => http.infer('a', input(v))),
        ...[5, 6, 7, 8].map((v) => grpc.infer('b', input(v))),
      ]);
      assert.deepEqual(
        results.map((r) => r.outputs[0].data[0]),
        [1, 2, 3, 4, 5, 6, 7, 8],
      );
    } finally {
      grpc.close();
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
    const runs = await executions(file);
    assert.equal(runs.length, 8);
    return runs;
  }

  it('two models sharing a resource of count 1 never execute at the same time', async () => {
    const runs = await sharedResourceRun('execution_count', join(dir, 'limited.json'));
    assert.equal(overlaps(runs), 0, `executions overlap: ${JSON.stringify(runs)}`);
  });

  it('with --rate-limit=off the same models run side by side (the control of the test above)', async () => {
    const runs = await sharedResourceRun('off', join(dir, 'off.json'));
    assert.ok(overlaps(runs) > 0, 'four instances of 60 ms each overlap without the limiter');
  });

  it('gives priority 1 twice the executions of priority 2 while both wait for the resource', async () => {
    const file = join(dir, 'priority.json');
    const r = '{ name: "R" count: 1 }';
    const repo = await repository({
      // Holds R first, so that every request of the other two is queued before either runs.
      gate: identity(`count: 1 ${limiter(r)}`, 300),
      high: identity(`count: 1 ${limiter(r, 1)}`, 15),
      low: identity(`count: 1 ${limiter(r, 2)}`, 15),
    });
    const s = await start({
      repositories: [repo],
      rateLimit: { mode: 'execution_count', resources: [{ name: 'R', count: 1 }] },
      trace: { file, level: 'TIMESTAMPS', rate: 1 },
    });
    const http = new NereidHttpClient({ url: s.url });
    try {
      const gate = http.infer('gate', input(0));
      await sleep(50);
      const n = 12;
      await Promise.all([
        gate,
        ...Array.from({ length: n }, (_, i) => http.infer('high', input(i))),
        ...Array.from({ length: n }, (_, i) => http.infer('low', input(i))),
      ]);
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
    const runs = await executions(file);
    assert.equal(overlaps(runs), 0);
    // The window where both models had every request queued: from the last arrival until one ran out.
    const lastQueued = Math.max(...runs.filter((x) => x.model !== 'gate').map((x) => x.queued));
    const window: string[] = [];
    const left = { high: 12, low: 12 } as Record<string, number>;
    for (const x of runs) {
      if (x.model === 'gate') continue;
      left[x.model]--;
      if (x.start >= lastQueued) window.push(x.model);
      if (left.high === 0 || left.low === 0) break;
    }
    const high = window.filter((m) => m === 'high').length;
    const low = window.length - high;
    assert.ok(window.length >= 9, `a long enough window where both waited: ${window.join(' ')}`);
    assert.ok(Math.abs(high - 2 * low) <= 2, `high ${high} vs low ${low}: ${window.join(' ')}`);
  });

  it('dynamic batching: a second instance blocked by the limiter leaves the queue to form larger batches', async () => {
    const file = join(dir, 'batching.json');
    const repo = await repository({
      batched: `backend: "identity" max_batch_size: 4
        input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
        output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
        instance_group [{ kind: KIND_CPU count: 2 ${limiter('{ name: "R" count: 1 }')} }]
        dynamic_batching { }
        parameters { key: "execute_delay_ms" value { string_value: "100" } }`,
    });
    const s = await start({
      repositories: [repo],
      rateLimit: { mode: 'execution_count' },
      trace: { file, level: 'TIMESTAMPS', rate: 1 },
    });
    const http = new NereidHttpClient({ url: s.url });
    let executed = 0;
    const row = (v: number) => [{ name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(v) }];
    try {
      const first = http.infer('batched', row(0));
      await sleep(30);
      const rest = Array.from({ length: 8 }, (_, i) => http.infer('batched', row(i + 1)));
      const out = await Promise.all([first, ...rest]);
      assert.deepEqual(
        out.map((r) => r.outputs[0].data[0]),
        [0, 1, 2, 3, 4, 5, 6, 7, 8],
      );
      const stats = (await (await fetch(`${s.url}/v2/models/batched/stats`)).json()) as {
        model_stats: { execution_count: number; inference_count: number }[];
      };
      assert.equal(stats.model_stats[0].inference_count, 9);
      executed = stats.model_stats[0].execution_count;
      assert.ok(executed < 9, `batches formed: ${JSON.stringify(stats.model_stats[0])}`);
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
    const runs = await executions(file);
    // A batch's requests share one execution (their intervals overlap); executions never overlap each other, so the
    // requests fall into exactly as many disjoint groups as there were executions.
    let groups = 0;
    let end = -Infinity;
    for (const r of runs) {
      if (r.start >= end) groups++;
      end = Math.max(end, r.end);
    }
    assert.equal(groups, executed, JSON.stringify(runs));
  });

  it('sequence batching: sequences bound to two instances sharing a resource take turns, every step answered', async () => {
    const file = join(dir, 'sequence.json');
    const repo = await repository({
      seq: `backend: "identity" max_batch_size: 1
        input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
        output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
        instance_group [{ kind: KIND_CPU count: 2 ${limiter('{ name: "R" count: 1 }')} }]
        sequence_batching { max_sequence_idle_microseconds: 5000000 }
        parameters { key: "execute_delay_ms" value { string_value: "40" } }`,
    });
    const s = await start({
      repositories: [repo],
      rateLimit: { mode: 'execution_count' },
      trace: { file, level: 'TIMESTAMPS', rate: 1 },
    });
    const http = new NereidHttpClient({ url: s.url });
    const row = (v: number) => [{ name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(v) }];
    const sequence = async (id: number): Promise<number[]> => {
      const out: number[] = [];
      for (let step = 0; step < 3; step++) {
        const r = await http.infer('seq', row(id * 10 + step), {
          parameters: { sequence_id: id, sequence_start: step === 0, sequence_end: step === 2 },
        });
        out.push(Number(r.outputs[0].data[0]));
      }
      return out;
    };
    try {
      assert.deepEqual(await Promise.all([sequence(1), sequence(2)]), [
        [10, 11, 12],
        [20, 21, 22],
      ]);
    } finally {
      await s.close();
      await rm(repo, { recursive: true, force: true });
    }
    const runs = await executions(file);
    assert.equal(runs.length, 6);
    assert.equal(overlaps(runs), 0, JSON.stringify(runs));
  });

  it("BAD CONFIG - a resource count above what --rate-limit-resource gives fails the load (Triton's message)", async () => {
    const repo = await repository({ a: identity(`count: 1 ${limiter('{ name: "resource1" count: 4 }')}`, 0) });
    try {
      await assert.rejects(
        start({
          repositories: [repo],
          rateLimit: { mode: 'execution_count', resources: [{ name: 'resource1', count: 3 }] },
        }),
        /Resource count for "resource1" is limited to 3 which will prevent scheduling of one or more model instances, the minimum required count is 4/,
      );
      // Named for another device only: this device has none.
      await assert.rejects(
        start({
          repositories: [repo],
          rateLimit: { mode: 'execution_count', resources: [{ name: 'resource1', count: 10, device: 10 }] },
        }),
        /Resource count for "resource1" is limited to 0 which will prevent/,
      );
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });

  it("BAD CONFIG - a resource both global and per-device fails the load (Triton's message)", async () => {
    const repo = await repository({
      a: identity(`count: 1 ${limiter('{ name: "r2" global: true count: 2 }')}`, 0),
      b: identity(`count: 1 ${limiter('{ name: "r2" count: 2 }')}`, 0),
    });
    try {
      await assert.rejects(
        start({ repositories: [repo], rateLimit: { mode: 'execution_count' } }),
        /Resource "r2" is present as both global and device-specific resource in the model configuration\./,
      );
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });

  it("BAD CALL - nereid serve refuses a bad --rate-limit-resource and a count too small, with Triton's messages", async () => {
    const repo = await repository({ a: identity(`count: 1 ${limiter('{ name: "resource1" count: 4 }')}`, 0) });
    try {
      const syntax = await serveExit([
        `--model-repository=${repo}`,
        '--rate-limit=execution_count',
        '--rate-limit-resource=resource1',
      ]);
      assert.notEqual(syntax.code, 0);
      assert.match(
        syntax.stderr,
        /--rate-limit-resource option format is '<resource_name>:<count>:<device>' or '<resource_name>:<count>'\. Got resource1/,
      );
      const small = await serveExit([
        `--model-repository=${repo}`,
        '--rate-limit=execution_count',
        '--rate-limit-resource=resource1:1',
      ]);
      assert.notEqual(small.code, 0);
      assert.match(small.stderr, /Resource count for \\?"resource1\\?" is limited to 1 which will prevent scheduling/);
    } finally {
      await rm(repo, { recursive: true, force: true });
    }
  });
});
