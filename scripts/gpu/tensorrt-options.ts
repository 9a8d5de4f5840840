/**
 * Seed 000's TensorRT options observed on real engines (the H200, scripts/gpu/tensorrt-on-device.sh): for each
 * option, a repository with a plan made by scripts/gpu/trt_models.py, the real server (serve(), HTTP on 127.0.0.1),
 * concurrent requests, and what the engine recorded (NEREID_TRT_TRACE: copies per input, batch intervals, memory
 * per execution context, graphs, profile used). Answers are compared with PyTorch's on the same weights.
 *
 *   node --import tsx scripts/gpu/tensorrt-options.ts PLANS_DIR   (the folder trt_models.py wrote)
 *
 * Prints one block per option; exits 1 when an observation contradicts what the option promises.
 * NEREID_OPTIONS_DRY=1: against the TEST DOUBLE of TensorRT (its PYTHONPATH set, fake plans), the server told
 * GPU 0 exists: checks this script's wiring on a machine without a GPU; its verdicts mean nothing there.
 */
import { readFileSync, rmSync, writeFileSync, mkdirSync, copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { serve } from '../../src/serve.js';

const dir = process.argv[2];
if (dir === undefined) throw new Error('usage: tensorrt-options.ts PLANS_DIR');
const TRACE = join(dir, 'trace.jsonl');
/** NEREID_OPTIONS_ONLY=plugins,graphs,...: only those sections (a rerun of what an earlier run could not show). */
const ONLY = process.env.NEREID_OPTIONS_ONLY?.split(',');
const section = (name: string): boolean => ONLY === undefined || ONLY.includes(name);
process.env.NEREID_TRT_TRACE = TRACE;
let failures = 0;

interface Event {
  event: string;
  pid: number;
  instance?: string;
  t0?: number;
  t1?: number;
  rows?: number;
  requests?: number;
  profile?: number;
  copies?: Record<string, number>;
  graph?: boolean;
  graphs?: number;
  context_bytes?: number;
  profile_device_memory?: number[];
  engine_device_memory?: number;
  allocation?: string;
  output_copy_stream?: boolean;
  busy_wait_events?: boolean;
  loaded?: string[];
  t?: number;
}

function say(s: string): void {
  process.stdout.write(`${s}\n`);
}
function verdict(ok: boolean, what: string): void {
  say(`  ${ok ? 'OK ' : 'BAD'} ${what}`);
  if (!ok) failures++;
}
function events(): Event[] {
  if (!existsSync(TRACE)) return [];
  return readFileSync(TRACE, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Event);
}

/** A repository with one model per entry: its plan and config.pbtxt text. */
function repo(name: string, models: Record<string, { plan: string; config: string }>): string {
  const r = join(dir, `repo-${name}`);
  rmSync(r, { recursive: true, force: true });
  for (const [m, { plan, config }] of Object.entries(models)) {
    mkdirSync(join(r, m, '1'), { recursive: true });
    copyFileSync(plan, join(r, m, '1', 'model.plan'));
    writeFileSync(join(r, m, 'config.pbtxt'), `name: "${m}"\nbackend: "tensorrt"\n${config}`);
  }
  return r;
}

async function withServer<T>(
  r: string,
  tensorrt: Record<string, string>,
  fn: (url: string) => Promise<T>,
): Promise<T | undefined> {
  rmSync(TRACE, { force: true });
  let running;
  try {
    running = await serve({
      repositories: [r],
      httpPort: 0,
      httpAddress: '127.0.0.1',
      grpcPort: 0,
      grpcAddress: '127.0.0.1',
      metricsPort: 0,
      backendConfig: new Map([['tensorrt', tensorrt]]),
      exitOnError: false,
      ...(process.env.NEREID_OPTIONS_DRY === '1' ? { gpus: [0] } : {}),
    });
  } catch (e) {
    say(`  server did not start: ${(e as Error).message}`);
    return undefined;
  }
  try {
    const index = (await (await fetch(`${running.httpUrl}/v2/repository/index`, { method: 'POST' })).json()) as Array<{
      name: string;
      state?: string;
      reason?: string;
    }>;
    for (const m of index) if (m.state !== 'READY') say(`  (model ${m.name} is ${m.state}: ${m.reason})`);
    return await fn(running.httpUrl as string);
  } finally {
    await running.close();
  }
}

interface Answer {
  status: number;
  body: { outputs?: Array<{ name: string; shape: number[]; data: number[] }>; error?: string };
}
async function infer(url: string, model: string, name: string, shape: number[], data: number[]): Promise<Answer> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name, shape, datatype: 'FP32', data }] }),
  });
  return { status: res.status, body: (await res.json()) as Answer['body'] };
}

function maxDiff(a: number[], b: number[]): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/** Total time two instances' batches ran at the same time, and the busy time, from the trace (ns). */
function overlap(batches: Event[]): { overlapNs: number; busyNs: number; instances: number } {
  let overlapNs = 0;
  let busyNs = 0;
  for (const a of batches) busyNs += a.t1! - a.t0!;
  for (let i = 0; i < batches.length; i++)
    for (let j = i + 1; j < batches.length; j++) {
      const a = batches[i]!;
      const b = batches[j]!;
      if (a.instance === b.instance) continue;
      overlapNs += Math.max(0, Math.min(a.t1!, b.t1!) - Math.max(a.t0!, b.t0!));
    }
  return { overlapNs, busyNs, instances: new Set(batches.map((b) => b.instance)).size };
}

const ref = (
  existsSync(join(dir, 'ref.json')) ? JSON.parse(readFileSync(join(dir, 'ref.json'), 'utf8')) : { x: [], y: [] }
) as { x: number[][]; y: number[][] };
const MLP = join(dir, 'mlp/1/model.plan');
const KIND = 'instance_group [ { kind: KIND_GPU count: 1 } ]\n';

say('=== answers against PyTorch, and coalesce-request-input (one copy per input per batch)');
for (const coalesce of section('coalesce') ? ['false', 'true'] : []) {
  const r = repo(`coalesce-${coalesce}`, {
    mlp: {
      plan: MLP,
      config: `max_batch_size: 64\ndynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [ 16 ] }\n${KIND}`,
    },
  });
  await withServer(r, { 'coalesce-request-input': coalesce }, async (url) => {
    const answers = await Promise.all(ref.x.map((row) => infer(url, 'mlp', 'x', [1, 64], row)));
    const diff = Math.max(...answers.map((a, i) => maxDiff(a.body.outputs?.[0]?.data ?? [NaN], ref.y[i]!)));
    verdict(
      answers.every((a) => a.status === 200) && diff < 1e-4,
      `16 requests answered, max |Nereid - PyTorch| = ${diff.toExponential(2)} (TF32 off both sides)`,
    );
    const batches = events().filter((e) => e.event === 'batch');
    const shown = batches.map((b) => `${b.requests} requests -> ${b.copies?.x} copies`).join(', ');
    say(`  coalesce-request-input=${coalesce}: batches ${shown}`);
    const big = batches.filter((b) => (b.requests ?? 0) > 1);
    verdict(
      big.length > 0 && big.every((b) => (coalesce === 'true' ? b.copies?.x === 1 : b.copies?.x === b.requests)),
      coalesce === 'true'
        ? 'every batch of several requests copied its input in ONE host-to-device copy (one contiguous buffer)'
        : 'without the option, one copy per request',
    );
  });
}

say('\n=== execution-policy: DEVICE_BLOCKING (one batch at a time per GPU) vs BLOCKING (instances overlap)');
const SEED_PLAN = join(dir, 'seed001/model_2/1/model.plan');
for (const policy of section('policy') ? ['DEVICE_BLOCKING', 'BLOCKING'] : []) {
  const r = repo(`policy-${policy}`, {
    enc: { plan: SEED_PLAN, config: 'max_batch_size: 32\ninstance_group [ { kind: KIND_GPU count: 2 } ]\n' },
  });
  await withServer(r, { 'execution-policy': policy }, async (url) => {
    const ids = Array.from({ length: 8 * 512 }, (_, i) => (i * 31) % 1000);
    const body = JSON.stringify({
      inputs: ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => ({
        name,
        shape: [8, 512],
        datatype: 'INT32',
        data: name === 'input_ids' ? ids : new Array(8 * 512).fill(name === 'attention_mask' ? 1 : 0),
      })),
    });
    const send = (): Promise<number> =>
      fetch(`${url}/v2/models/enc/infer`, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/json' },
      }).then(async (res) => (await res.arrayBuffer(), res.status));
    const statuses: number[] = [];
    for (let round = 0; round < 6; round++) statuses.push(...(await Promise.all(Array.from({ length: 8 }, send))));
    const o = overlap(events().filter((e) => e.event === 'batch'));
    say(
      `  ${policy}: ${statuses.length} requests (${statuses.filter((s) => s === 200).length} OK) on ${o.instances} instances; GPU sections busy ${(o.busyNs / 1e6).toFixed(1)} ms, overlapping ${(o.overlapNs / 1e6).toFixed(2)} ms`,
    );
    verdict(
      policy === 'DEVICE_BLOCKING' ? o.overlapNs === 0 && o.instances === 2 : o.overlapNs > 0,
      policy === 'DEVICE_BLOCKING'
        ? 'no two batches on the GPU at once'
        : 'the two instances ran batches at the same time',
    );
  });
}

say('\n=== execution_context_allocation_strategy and several profiles (profile in instance_group)');
const WIDE = join(dir, 'wide/1/model.plan');
const contextBytes: Record<string, number> = {};
for (const strategy of section('alloc') ? ['STATIC', 'ON_PROFILE_CHANGE'] : []) {
  const r = repo(`alloc-${strategy}`, {
    wide: {
      plan: WIDE,
      config: `max_batch_size: 8\nparameters { key: "execution_context_allocation_strategy" value { string_value: "${strategy}" } }\ninstance_group [ { kind: KIND_GPU count: 1 profile: [ "0" ] } ]\n`,
    },
  });
  await withServer(r, {}, async (url) => {
    const small = await infer(url, 'wide', 'x', [4, 2048], new Array(4 * 2048).fill(0.5));
    const inst = events().find((e) => e.event === 'instance');
    contextBytes[strategy] = inst?.context_bytes ?? NaN;
    say(
      `  ${strategy}: context took ${((inst?.context_bytes ?? 0) / 2 ** 20).toFixed(1)} MiB (engine: all profiles ${((inst?.engine_device_memory ?? 0) / 2 ** 20).toFixed(1)} MiB, profile 0 ${((inst?.profile_device_memory?.[0] ?? 0) / 2 ** 20).toFixed(1)} MiB)`,
    );
    verdict(small.status === 200, `batch 4 on the instance of profile 0 (1..8): HTTP ${small.status}`);
  });
}
if (section('alloc'))
  verdict(
    contextBytes.ON_PROFILE_CHANGE! < contextBytes.STATIC!,
    `ON_PROFILE_CHANGE took less device memory than STATIC for a profile-0 instance (${(contextBytes.ON_PROFILE_CHANGE! / 2 ** 20).toFixed(1)} vs ${(contextBytes.STATIC! / 2 ** 20).toFixed(1)} MiB)`,
  );
if (section('alloc')) {
  const r = repo('profiles', {
    wide: {
      plan: WIDE,
      config: `max_batch_size: 2048\ninstance_group [ { kind: KIND_GPU count: 1 profile: [ "1" ] } ]\n`,
    },
  });
  await withServer(r, {}, async (url) => {
    const large = await infer(url, 'wide', 'x', [512, 2048], new Array(512 * 2048).fill(0.5));
    const small = await infer(url, 'wide', 'x', [4, 2048], new Array(4 * 2048).fill(0.5));
    const used = events()
      .filter((e) => e.event === 'batch')
      .map((e) => e.profile);
    verdict(
      large.status === 200 && used.includes(1),
      `instance on profile 1: batch 512 ran on profile ${used.join(',')}`,
    );
    verdict(small.status === 400, `batch 4 (profile 1 starts at 256) refused: "${small.body.error ?? ''}"`);
  });
}

say('\n=== CUDA graphs (optimization.cuda.graphs, graph_spec), busy_wait_events, output_copy_stream');
for (const variant of section('graphs') ? ['graphs', 'busy-wait+output-copy-stream'] : []) {
  const cuda =
    variant === 'graphs'
      ? 'optimization { cuda { graphs: true graph_spec [ { batch_size: 1 }, { batch_size: 4 } ] } }'
      : 'optimization { cuda { busy_wait_events: true output_copy_stream: true } }';
  const r = repo(variant.replace(/\W/g, ''), {
    mlp: { plan: MLP, config: `max_batch_size: 64\n${cuda}\n${KIND}` },
  });
  await withServer(r, {}, async (url) => {
    const four = ref.x.slice(0, 4).flat();
    const a4 = await infer(url, 'mlp', 'x', [4, 64], four);
    const a3 = await infer(url, 'mlp', 'x', [3, 64], ref.x.slice(0, 3).flat());
    const diff = maxDiff(a4.body.outputs?.[0]?.data ?? [NaN], ref.y.slice(0, 4).flat());
    const ev = events();
    const inst = ev.find((e) => e.event === 'instance');
    const batches = ev.filter((e) => e.event === 'batch');
    say(
      `  ${variant}: instance ${JSON.stringify({ graphs: inst?.graphs, output_copy_stream: inst?.output_copy_stream, busy_wait_events: inst?.busy_wait_events })}; batches ${batches.map((b) => `${b.rows} rows graph=${b.graph}`).join(', ')}`,
    );
    verdict(
      a4.status === 200 && a3.status === 200 && diff < 1e-4,
      `answers match PyTorch (max diff ${diff.toExponential(2)})`,
    );
    if (variant === 'graphs') {
      verdict(
        inst?.graphs === 2 && batches[0]?.graph === true && batches[1]?.graph === false,
        'batch 4 replayed its graph, batch 3 (no graph_spec) ran plainly',
      );
    } else {
      verdict(inst?.output_copy_stream === true && inst?.busy_wait_events === true, 'both options reached the engine');
    }
  });
}

say('\n=== plugins: libraries loaded in the order given, before the engine; missing or broken: a load error naming it');
const PLUGIN = join(dir, 'plugin/1/model.plan');
const orderFile = join(dir, 'plugin-order.txt');
process.env.NEREID_PLUGIN_ORDER = orderFile;
const libs = process.env.NEREID_ORDER_LIBS ?? '/tmp/trt-node';
const plugRef = (
  section('plugins') ? JSON.parse(readFileSync(join(dir, 'plugin-ref.json'), 'utf8')) : { plugin: '', x: [], y: [] }
) as {
  plugin: string;
  x: number[];
  y: number[];
};
for (const plugins of section('plugins')
  ? [`${libs}/libnereid_order_b.so;${libs}/libnereid_order_a.so`, '/nonexistent/libmissing.so', join(dir, 'broken.so')]
  : []) {
  writeFileSync(join(dir, 'broken.so'), 'not an ELF file');
  rmSync(orderFile, { force: true });
  const r = repo('plugins', { plug: { plan: PLUGIN, config: `max_batch_size: 4\n${KIND}` } });
  await withServer(r, { plugins }, async (url) => {
    const ready = await fetch(`${url}/v2/models/plug/ready`);
    const idx = await (await fetch(`${url}/v2/repository/index`, { method: 'POST' })).json();
    say(`  plugins=${plugins}: ready ${ready.status}; ${JSON.stringify(idx)}`);
    if (plugins.includes('order')) {
      const order = existsSync(orderFile) ? readFileSync(orderFile, 'utf8').trim().split('\n') : [];
      const ev = events();
      const engines = ev.filter((e) => e.event === 'engine');
      const before = engines.every(
        (e) => (ev.find((p) => p.event === 'plugins' && p.pid === e.pid)?.t ?? Infinity) < e.t!,
      );
      // Each process that opens the plan loads them: the one that reads the plan's facts, then the instance's.
      verdict(
        /^(b,a)(,b,a)*$/.test(order.join(',')) && engines.length > 0 && before,
        `loaded in the order given (${order.join(' then ')}; once per engine process) before the engine was deserialized`,
      );
      const a = await infer(url, 'plug', 'x', [2, 4, 8, 8], plugRef.x.flat(3) as number[]);
      const diff = maxDiff(a.body.outputs?.[0]?.data ?? [NaN], (plugRef.y as unknown as number[][][][]).flat(3));
      verdict(
        a.status === 200 && diff < 1e-3,
        `the plan's ${plugRef.plugin} layer (TensorRT's own plugin) answered, max diff to numpy ${diff.toExponential(2)}`,
      );
    } else {
      verdict(
        ready.status !== 200 && JSON.stringify(idx).includes(plugins.split('/').pop()!),
        'the model did not load, and the reason names the library',
      );
    }
  });
}

say(
  `\n${failures === 0 ? 'every observation as the options promise' : `${failures} observation(s) contradict the options`}`,
);
process.exitCode = failures === 0 ? 0 : 1;
