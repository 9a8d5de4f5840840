import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { LogEntry } from '../helpers/recording-logger.js';
import { recordingLogger } from '../helpers/recording-logger.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';
import { DOUBLE } from '../helpers/tensorrt.js';
import { ADD_CONFIG, addOnnx, buildsIn, entries, tempDir, writeOnnxModel } from '../helpers/tensorrt-onnx.js';

// A model.onnx with backend "tensorrt", built into a plan at load through the plan cache, served by the real server
// with the TEST DOUBLE of TensorRT in its build and engine processes (this machine has no GPU: the server is told
// GPU 0 exists). Builds are counted by the double's build events. On real TensorRT: scripts/gpu/tensorrt-onnx.sh.

const ENV = [
  'PYTHONPATH',
  'NEREID_TRT_DOUBLE_LOG',
  'NEREID_TRT_DOUBLE_VERSION',
  'NEREID_CUDA_DOUBLE_NAME',
  'NEREID_CUDA_DOUBLE_GPUS',
  'NEREID_TRT_DOUBLE_BUILDER',
  'NEREID_TRT_DOUBLE_BUILD_GATE',
];
const saved = new Map(ENV.map((k) => [k, process.env[k]]));

let repo: string;
let cache: string;
let log: string;
const servers: TestServer[] = [];

beforeEach(() => {
  process.env.PYTHONPATH = DOUBLE;
  repo = dir('nereid-trt-onnx-repo-');
  cache = join(dir('nereid-trt-onnx-cache-'), 'plans');
  log = join(dir('nereid-trt-onnx-log-'), 'events.jsonl');
  process.env.NEREID_TRT_DOUBLE_LOG = log;
});

const made: string[] = [];
const dir = (prefix: string): string => {
  const d = tempDir(prefix);
  made.push(d);
  return d;
};

afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const [k, v] of saved) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function start(logs: LogEntry[] = [], more: Parameters<typeof startNereid>[0] = {}): Promise<TestServer> {
  const s = await startNereid({
    repositories: [repo],
    gpus: [0],
    modelControlMode: 'explicit',
    loadModels: ['*'],
    logger: recordingLogger(logs),
    backendConfig: new Map([['tensorrt', { 'plan-cache-directory': cache }]]),
    ...more,
  });
  servers.push(s);
  return s;
}

const post = (url: string, body?: unknown): Promise<Response> =>
  fetch(url, { method: 'POST', body: body === undefined ? undefined : JSON.stringify(body) });

async function infer(url: string, model: string): Promise<number[]> {
  const body = {
    inputs: [
      { name: 'INPUT0', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] },
      { name: 'INPUT1', datatype: 'FP32', shape: [1, 4], data: [1, 1, 1, 1] },
    ],
  };
  const res = await post(`${url}/v2/models/${model}/infer`, body);
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { outputs: { data: number[] }[] }).outputs[0].data;
}

async function index(url: string): Promise<{ name: string; state: string; reason: string }[]> {
  return (await (await post(`${url}/v2/repository/index`)).json()) as { name: string; state: string; reason: string }[];
}

const said = (logs: LogEntry[], re: RegExp, level?: string): boolean =>
  logs.some((l) => re.test(l.msg) && (level === undefined || l.level === level));

/** The double's plan copies INPUT0 to OUTPUT0 (its "kernels" are named in the plan, not the ONNX graph's). */
const ANSWER = [1, 2, 3, 4];

describe('tensorrt backend: a model.onnx is built into a plan once, and reused', () => {
  it('the first load builds; two instances, an unload+load over gRPC and a restart reuse the plan', async () => {
    writeOnnxModel(repo, 'enc', addOnnx(), ADD_CONFIG('enc', 'instance_group { count: 2 kind: KIND_GPU }'));
    const logs: LogEntry[] = [];
    const s = await start(logs);
    assert.equal(buildsIn(log), 1, 'one build for the model and both of its instances');
    assert.ok(said(logs, /building a TensorRT 11\.2\.1\.2 plan from .*model\.onnx on Test Double GPU/));
    assert.ok(
      logs.some((l) => typeof l.obj.progress === 'string'),
      'build progress reaches the log (and console)',
    );
    assert.deepEqual(await infer(s.url, 'enc'), ANSWER);
    assert.equal(entries(cache).length, 1);

    const client = inferenceClient(`127.0.0.1:${String(s.grpcPort)}`);
    try {
      await callUnary(client, 'RepositoryModelUnload', { model_name: 'enc' });
      await callUnary(client, 'RepositoryModelLoad', { model_name: 'enc' });
    } finally {
      client.close();
    }
    assert.equal(buildsIn(log), 1, 'the reload found the plan in the cache');
    assert.ok(said(logs, /model 'enc': TensorRT plan from the cache/));
    assert.deepEqual(await infer(s.url, 'enc'), ANSWER);

    await s.close();
    servers.length = 0;
    const again = await start();
    assert.equal(buildsIn(log), 1, 'a restarted server found it too');
    assert.deepEqual(await infer(again.url, 'enc'), ANSWER);
  });

  it('instances on two GPUs of the same model share the one plan built on the first', async () => {
    process.env.NEREID_CUDA_DOUBLE_GPUS = '2';
    writeOnnxModel(
      repo,
      'enc',
      addOnnx(),
      ADD_CONFIG('enc', 'instance_group { count: 1 kind: KIND_GPU gpus: [0, 1] }'),
    );
    const s = await start([], { gpus: [0, 1] });
    assert.equal(buildsIn(log), 1);
    for (let i = 0; i < 4; i++) assert.deepEqual(await infer(s.url, 'enc'), ANSWER);
    const deserialized = readFileSync(log, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"ev": "deserialize"') || l.includes('"ev":"deserialize"'));
    // The probe that read the plan's facts, then one engine process per GPU: three processes read the one plan.
    assert.equal(
      new Set(deserialized.map((l) => (JSON.parse(l) as { pid: number }).pid)).size,
      3,
      'the probe and one engine process per GPU loaded it',
    );
  });

  it('other build options, another TensorRT version or another GPU model each get an entry of their own', async () => {
    writeOnnxModel(repo, 'enc', addOnnx());
    const s = await start();
    assert.equal(buildsIn(log), 1);
    const fp16 = {
      name: 'enc',
      backend: 'tensorrt',
      max_batch_size: 8,
      input: [
        { name: 'INPUT0', data_type: 'TYPE_FP32', dims: [4] },
        { name: 'INPUT1', data_type: 'TYPE_FP32', dims: [4] },
      ],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_FP32', dims: [4] }],
      parameters: { precision: { string_value: 'fp16' } },
    };
    const res = await post(`${s.url}/v2/repository/models/enc/load`, { parameters: { config: JSON.stringify(fp16) } });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(buildsIn(log), 2, 'fp16 is another plan');
    const plans = entries(cache).map(
      (k) => JSON.parse(readFileSync(join(cache, k, 'entry.json'), 'utf8')) as Record<string, { precision?: string }>,
    );
    assert.deepEqual(plans.map((p) => p.build.precision).sort(), ['fp16', 'fp32']);

    process.env.NEREID_TRT_DOUBLE_VERSION = '10.6.0.26';
    assert.equal((await post(`${s.url}/v2/repository/models/enc/load`)).status, 200);
    assert.equal(buildsIn(log), 3, "TensorRT 10.6 never uses 11.2's plan");
    process.env.NEREID_CUDA_DOUBLE_NAME = 'NVIDIA H200';
    assert.equal((await post(`${s.url}/v2/repository/models/enc/load`)).status, 200);
    assert.equal(buildsIn(log), 4, "another GPU model never uses the first one's plan");
    assert.equal(entries(cache).length, 4);
    assert.deepEqual(await infer(s.url, 'enc'), ANSWER);
  });

  it('BAD ENTRY - a cached plan whose bytes were changed is rebuilt with a warning, never loaded', async () => {
    writeOnnxModel(repo, 'enc', addOnnx());
    const logs: LogEntry[] = [];
    const s = await start(logs);
    const [key] = entries(cache);
    const plan = join(cache, key, 'model.plan');
    const bytes = readFileSync(plan);
    bytes[bytes.length - 3] ^= 0x5a;
    writeFileSync(plan, bytes);
    assert.equal((await post(`${s.url}/v2/repository/models/enc/load`)).status, 200);
    assert.equal(buildsIn(log), 2);
    assert.ok(said(logs, new RegExp(`entry ${key} is not used: its plan's sha256 is .*; rebuilding it`), 'warn'));
    assert.deepEqual(await infer(s.url, 'enc'), ANSWER);
  });
});

describe('tensorrt backend: a model.onnx with a partial config', () => {
  it('a config with no inputs or outputs is completed from the plan built with batch 1..max_batch_size', async () => {
    writeOnnxModel(repo, 'enc', addOnnx(), 'name: "enc"\nbackend: "tensorrt"\nmax_batch_size: 8\n');
    const s = await start();
    const cfg = (await (await fetch(`${s.url}/v2/models/enc/config`)).json()) as {
      max_batch_size: number;
      input: { name: string; dims: string[] }[];
    };
    assert.equal(cfg.max_batch_size, 8);
    assert.deepEqual(
      cfg.input.map((i) => [i.name, i.dims.map(Number)]),
      [
        ['INPUT0', [4]],
        ['INPUT1', [4]],
      ],
    );
    assert.deepEqual(await infer(s.url, 'enc'), ANSWER);
    assert.equal(buildsIn(log), 1, 'auto-complete and the load that followed built once');
  });

  it('BAD CONFIG - max_batch_size 0 and a dynamic dim the config does not give: the load names the parameters', async () => {
    writeOnnxModel(repo, 'enc', addOnnx(), 'name: "enc"\nbackend: "tensorrt"\n');
    const s = await start([], { exitOnError: false });
    const [m] = await index(s.url);
    assert.equal(m.state, 'UNAVAILABLE');
    assert.match(
      m.reason,
      /input 'INPUT0' has dynamic dims \[-1,4\]: give parameters min_shapes, opt_shapes and max_shapes/,
    );
  });
});

describe('tensorrt backend: concurrent builders of one plan', { timeout: 300_000 }, () => {
  /** Holds every build until a load is seen waiting for it (the double's build gate), then lets it finish. */
  async function openGateOnWait(logs: LogEntry[][], gate: string): Promise<void> {
    while (!logs.some((l) => said(l, /waiting for another build of the same TensorRT plan/))) {
      await new Promise((r) => setTimeout(r, 50));
    }
    writeFileSync(gate, '');
  }

  it('two models sharing one ONNX file, loading together, build it once', async () => {
    const gate = join(dir('nereid-trt-gate-'), 'open');
    process.env.NEREID_TRT_DOUBLE_BUILD_GATE = gate;
    const onnx = addOnnx();
    writeOnnxModel(repo, 'a', onnx);
    writeOnnxModel(repo, 'b', onnx);
    const logs: LogEntry[] = [];
    const [s] = await Promise.all([start(logs, { modelLoadThreadCount: 2 }), openGateOnWait([logs], gate)]);
    assert.equal(buildsIn(log), 1);
    assert.ok(said(logs, /built meanwhile by another load/), 'the waiting load took the plan the other one built');
    assert.deepEqual(
      (await index(s.url)).map((m) => [m.name, m.state]),
      [
        ['a', 'READY'],
        ['b', 'READY'],
      ],
    );
    assert.deepEqual(await infer(s.url, 'b'), ANSWER);
  });

  it('two servers loading the same model at once: one builds, the other waits and reuses it', async () => {
    const gate = join(dir('nereid-trt-gate-'), 'open');
    process.env.NEREID_TRT_DOUBLE_BUILD_GATE = gate;
    writeOnnxModel(repo, 'enc', addOnnx());
    const logs: LogEntry[][] = [[], []];
    const [s1, s2] = await Promise.all([start(logs[0]), start(logs[1]), openGateOnWait(logs, gate)]);
    assert.equal(buildsIn(log), 1);
    const waited = logs.filter((l) => said(l, /waiting for another build of the same TensorRT plan/));
    assert.equal(waited.length, 1, 'exactly one server waited');
    assert.ok(said(waited[0], /built meanwhile by another load/));
    assert.deepEqual(await infer(s1.url, 'enc'), ANSWER);
    assert.deepEqual(await infer(s2.url, 'enc'), ANSWER);
  });
});

describe('tensorrt backend: what an ONNX load refuses', () => {
  it('BAD CALL - a load request whose config names a cache folder is INVALID_ARG, over HTTP and gRPC', async () => {
    writeOnnxModel(repo, 'enc', addOnnx());
    const s = await start();
    const config = JSON.stringify({
      name: 'enc',
      backend: 'tensorrt',
      max_batch_size: 8,
      parameters: { plan_cache_directory: { string_value: '/tmp/elsewhere' } },
    });
    const res = await post(`${s.url}/v2/repository/models/enc/load`, { parameters: { config } });
    assert.equal(res.status, 400);
    assert.match(
      ((await res.json()) as { error: string }).error,
      /parameter 'plan_cache_directory' is refused: the TensorRT plan cache is the operator's/,
    );
    const client = inferenceClient(`127.0.0.1:${String(s.grpcPort)}`);
    try {
      await assert.rejects(
        callUnary(client, 'RepositoryModelLoad', {
          model_name: 'enc',
          parameters: { config: { string_param: config } },
        }),
        (e: Error & { code?: number; details?: string }) =>
          e.code === 3 && /plan cache is the operator's/.test(e.details ?? ''),
      );
    } finally {
      client.close();
    }
    assert.equal(entries(cache).length, 1, 'nothing was built elsewhere or here for it');
  });

  it("BAD MODEL - a failed build fails the load UNAVAILABLE with TensorRT's reason; nothing is cached", async () => {
    process.env.NEREID_TRT_DOUBLE_BUILDER = 'fail-build';
    writeOnnxModel(repo, 'enc', addOnnx());
    const s = await start([], { exitOnError: false });
    const [m] = await index(s.url);
    assert.equal(m.state, 'UNAVAILABLE');
    assert.match(
      m.reason,
      /model 'enc': TensorRT could not build a plan from .*model\.onnx: .*Error Code 10: Internal Error/,
    );
    const res = await post(`${s.url}/v2/repository/models/enc/load`);
    assert.equal(res.status, 400, "a failed load is 400, as Triton's 'load failed for model'");
    assert.match(((await res.json()) as { error: string }).error, /Could not find any implementation for node/);
    const left = existsSync(cache) ? entries(cache).flatMap((k) => readdirSync(join(cache, k))) : [];
    assert.deepEqual(left, [], 'no plan and no entry.json were left');
  });
});
