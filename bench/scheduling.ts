/**
 * Scheduling benchmark: `simple` and `text_encoder` (seq 128) over HTTP binary at concurrency
 * 1, 8 and 64, with the dynamic batcher on and off, each in its own server process that reports its
 * event-loop delay (perf_hooks monitorEventLoopDelay) over IPC; plus raw onnxruntime-node throughput of
 * text_encoder at each batch size with the same thread budget (one session, default threads).
 *
 *   node --import tsx bench/scheduling.ts [--seconds 3]
 *
 * "off" is max_batch_size 1 (same request shapes, direct scheduler); "on" is max_batch_size 8 with
 * `dynamic_batching {}`. text_encoder runs one instance in both, like the raw session.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { percentile, postBinaryInfer } from './common.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const examples = join(root, 'examples/model_repository');
const argSeconds = Number(process.argv[process.argv.indexOf('--seconds') + 1]);
const seconds = Number.isFinite(argSeconds) && argSeconds > 0 ? argSeconds : 3;
const SEQ = 128;

// ---- parent ---------------------------------------------------------------------------------------------
interface Row {
  model: string;
  batching: string;
  concurrency: number;
  rps: number;
  p50: number;
  p99: number;
  lagP99: number;
}

async function makeRepo(batching: boolean): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `nereid-bench-${batching ? 'on' : 'off'}-`));
  const batch = batching ? 'max_batch_size: 8\ndynamic_batching { }' : 'max_batch_size: 1';
  const io = (n: string, d: string) => `{ name: "${n}" data_type: TYPE_INT32 dims: [ ${d} ] }`;
  const configs: Record<string, string> = {
    simple: `platform: "onnxruntime_onnx"\n${batch}
input [ ${io('INPUT0', '16')}, ${io('INPUT1', '16')} ]
output [ ${io('OUTPUT0', '16')}, ${io('OUTPUT1', '16')} ]`,
    text_encoder: `backend: "onnxruntime"\n${batch}\ninstance_group [ { count: 1 kind: KIND_CPU } ]`,
  };
  for (const [name, config] of Object.entries(configs)) {
    await mkdir(join(dir, name, '1'), { recursive: true });
    await writeFile(join(dir, name, 'config.pbtxt'), config);
    await copyFile(join(examples, name, '1/model.onnx'), join(dir, name, '1/model.onnx'));
  }
  return dir;
}

function ask<T>(child: ChildProcess, msg: string): Promise<T> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(m as T));
    child.send(msg);
  });
}

function binaryBody(inputs: { name: string; shape: number[]; data: Int32Array }[], outputs: string[]) {
  const header = Buffer.from(
    JSON.stringify({
      inputs: inputs.map((i) => ({
        name: i.name,
        shape: i.shape,
        datatype: 'INT32',
        parameters: { binary_data_size: i.data.byteLength },
      })),
      outputs: outputs.map((name) => ({ name, parameters: { binary_data: true } })),
    }),
  );
  const body = Buffer.concat([header, ...inputs.map((i) => Buffer.from(i.data.buffer))]);
  return { body, headerLength: header.length };
}

const REQUESTS = {
  simple: binaryBody(
    [
      { name: 'INPUT0', shape: [1, 16], data: new Int32Array(16).map((_, i) => i) },
      { name: 'INPUT1', shape: [1, 16], data: new Int32Array(16).fill(1) },
    ],
    ['OUTPUT0', 'OUTPUT1'],
  ),
  text_encoder: binaryBody(
    [
      { name: 'input_ids', shape: [1, SEQ], data: new Int32Array(SEQ).map((_, i) => (i * 7) % 1000) },
      { name: 'attention_mask', shape: [1, SEQ], data: new Int32Array(SEQ).fill(1) },
      { name: 'token_type_ids', shape: [1, SEQ], data: new Int32Array(SEQ) },
    ],
    ['output'],
  ),
};

async function load(port: number, model: keyof typeof REQUESTS, concurrency: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const { body, headerLength } = REQUESTS[model];
  const once = (): Promise<void> => postBinaryInfer(agent, port, model, body, headerLength);
  // Warm-up: sessions, sockets, JIT.
  const warmEnd = performance.now() + 500;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < warmEnd) await once();
    }),
  );
  const lat: number[] = [];
  const t0 = performance.now();
  const end = t0 + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        await once();
        lat.push(performance.now() - t);
      }
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  return { rps: lat.length / elapsed, p50: percentile(lat, 50), p99: percentile(lat, 99) };
}

async function rawTextEncoder(): Promise<{ batch: number; seqPerSec: number }[]> {
  const ort = await import('onnxruntime-node');
  const session = await ort.InferenceSession.create(join(examples, 'text_encoder/1/model.onnx'));
  const out: { batch: number; seqPerSec: number }[] = [];
  for (const b of [1, 2, 4, 8]) {
    const t = (fill: (i: number) => number) =>
      new ort.Tensor(
        'int32',
        new Int32Array(b * SEQ).map((_, i) => fill(i)),
        [b, SEQ],
      );
    const feeds = { input_ids: t((i) => (i * 7) % 1000), attention_mask: t(() => 1), token_type_ids: t(() => 0) };
    for (let i = 0; i < 5; i++) await session.run(feeds);
    let n = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < seconds * 1000) {
      await session.run(feeds);
      n += b;
    }
    out.push({ batch: b, seqPerSec: n / ((performance.now() - t0) / 1000) });
  }
  await session.release();
  return out;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const batching of [false, true]) {
    const repo = await makeRepo(batching);
    const child = fork(fileURLToPath(import.meta.url), ['--child', repo], {
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    try {
      const { port } = await new Promise<{ port: number }>((resolve) =>
        child.once('message', (m) => resolve(m as { port: number })),
      );
      for (const model of ['simple', 'text_encoder'] as const) {
        for (const concurrency of [1, 8, 64]) {
          child.send('reset');
          const r = await load(port, model, concurrency);
          const lag = await ask<{ p99: number }>(child, 'lag');
          rows.push({ model, batching: batching ? 'on' : 'off', concurrency, ...r, lagP99: lag.p99 });
          console.error(`done ${model} batching=${batching} c${concurrency}: ${r.rps.toFixed(0)} req/s`);
        }
      }
      child.send('stop');
    } finally {
      setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      await rm(repo, { recursive: true, force: true });
    }
  }
  const raw = await rawTextEncoder();
  console.log('| model | batching | concurrency | req/s | p50 ms | p99 ms | server event-loop lag p99 ms |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.model} | ${r.batching} | ${r.concurrency} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.lagP99.toFixed(2)} |`,
    );
  }
  console.log(
    '\nraw onnxruntime-node text_encoder (one session, default threads): ' +
      raw.map((r) => `batch ${r.batch}: ${r.seqPerSec.toFixed(0)} seq/s`).join(', '),
  );
  const best = Math.max(...raw.map((r) => r.seqPerSec));
  const find = (m: string, b: string, c: number) =>
    rows.find((r) => r.model === m && r.batching === b && r.concurrency === c) as Row;
  const simpleGain = find('simple', 'on', 64).rps / find('simple', 'off', 64).rps;
  const textRatio = find('text_encoder', 'on', 64).rps / best;
  const maxLag = Math.max(...rows.map((r) => r.lagP99));
  console.log(`simple c64 batching gain: ${simpleGain.toFixed(2)}x (target >= 3x)`);
  console.log(`text_encoder c64 batched / raw best: ${(100 * textRatio).toFixed(0)}% (target >= 95%)`);
  console.log(`worst server event-loop lag p99: ${maxLag.toFixed(2)} ms (target <= 5 ms)`);
}

// ---- entry: the child is the server, reporting its event-loop delay; else the parent runs the load ------------------------------------------------
if (process.argv[2] === '--child') {
  const { serve } = await import('../src/serve.js');
  // metricsPort 0: an ephemeral port, so the bench never collides with a server already running here.
  const opts = { repositories: [process.argv[3]], httpPort: 0, httpAddress: '127.0.0.1', metricsPort: 0 };
  const running = await serve(opts);
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  process.on('message', (m: string) => {
    if (m === 'reset') h.reset();
    if (m === 'lag') process.send?.({ p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 });
    // The child exits when closed; a failed close surfaces as an unhandled rejection, which ends it too.
    if (m === 'stop') void running.close().then(() => process.exit(0));
  });
  process.send?.({ port: running.httpPort });
} else {
  await main();
}
